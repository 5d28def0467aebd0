# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""pUCT's selection at an interior node of the planner's tree, in C.

`select(node, c_puct)` is `xflowrl.planning.search.select_numpy` in one
loop: the same action values (`Node.action_values`), normalised over the
live actions as `search._normalise` does, the same exploration term, and
the first action of the largest score. Every number is computed with the
same double-precision operations in the same order, so both pick the same
action (tests/planning/puct_test.py). It returns -1 where every action is
dead or taken at the root only, and -2, leaving the choice to the numpy
statement, where a value or a prior is NaN (numpy's NaN rules for min,
max and argmax are not restated here).

A select walks every action of the node (hundreds on a large graph), and
the planner selects at every interior node of every simulation; as about
twenty small numpy calls it was a third of the planner's CPU on
SqueezeNet (docs/planning.md, "Speed").
"""

from libc.math cimport isnan, sqrt
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


def select(node, double c_puct):
    """The index of the action pUCT takes at expanded `node`; -1 if none
    is alive, -2 where a value or a prior is NaN (module docstring)."""
    expansion = node.expansion
    cdef const double[:] costs = expansion.costs
    cdef const double[:] prior = node.prior
    cdef const int64_t[:] edge = node.edge_visits
    cdef const unsigned char[:] dead = node.dead
    cdef const unsigned char[:] root_only = node.root_only
    cdef Py_ssize_t count = costs.shape[0]
    cdef Py_ssize_t singles = expansion.singles
    cdef double cost = node.cost
    cdef Py_ssize_t i, index, best_index = -1
    cdef double value, below, low = 0.0, high = 0.0, span, q, score, best = 0.0
    cdef double explore = sqrt(<double>(node.visits + 1))
    cdef bint any_alive = False
    if count == 0:
        return -1
    cdef double *values = <double *> malloc(count * sizeof(double))
    if values == NULL:
        raise MemoryError()
    try:
        for i in range(count):
            values[i] = costs[i]
        # Node.action_values: a built child's best cost, for a candidate
        # only where it is below the candidate's own (exact) cost.
        for key, child in node.children.items():
            index = key
            below = child.best_cost
            if index >= singles or below < values[index]:
                values[index] = below
        for i in range(count):
            value = cost - values[i]
            values[i] = value
            if isnan(value) or isnan(prior[i]):
                return -2
            if dead[i] or root_only[i]:
                continue
            if not any_alive:
                low = high = value
                any_alive = True
            elif value < low:
                low = value
            elif value > high:
                high = value
        if not any_alive:
            return -1
        span = high - low
        for i in range(count):
            if dead[i] or root_only[i]:
                continue
            if high > low:
                q = (values[i] - low) / span
                q = 0.0 if q < 0.0 else q
                q = 1.0 if q > 1.0 else q
            else:
                q = 0.5
            score = q + c_puct * prior[i] * explore / <double>(1 + edge[i])
            if best_index < 0 or score > best:
                best, best_index = score, i
        return best_index
    finally:
        free(values)
