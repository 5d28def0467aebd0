# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The engine planner's inner loops in C: what it computes for every
expansion and at every interior node of every simulation, where as dozens
of small numpy calls it was most of the planner's own CPU on small graphs
(docs/planning.md, "Real steps and what they cost").

Each function computes what its numpy statement computes, with the same
double-precision operations in the same order, so that the planner takes
the same actions (tests/planning/inner_test.py):

- `select`: pUCT's action at an interior node
  (`xflowrl.planning.search.select_numpy`);
- `expansion_arrays`: an expansion's actions and costs from the engine's
  step arrays (`EngineSimulator.expand`'s numpy statement before it,
  kept in tests/planning/inner_test.py as the reference);
- `xfer_cost_logits`: the `xfer` prior's logits
  (`xflowrl.planning.priors.XferCostPrior.logits_numpy`).

Sums follow numpy's pairwise summation (`_pairwise_sum`), as its `sum`
does over a contiguous axis; exp and log are the C library's, as numpy's
are on a CPU without AVX512F (on one with it, numpy has its own, and the
prior's logits may differ in the last bits). Where a value or a prior
holds NaN (`select`), or a cost is NaN or the candidates are not listed
xfer by xfer (`xfer_cost_logits`), the function answers "not here" and the
numpy statement decides; `expansion_arrays` takes NaN past an xfer's
candidates as no gain, as `np.fmin` does.
"""

from cpython.buffer cimport (PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBuffer_Release,
                             PyObject_GetBuffer)
from libc.math cimport exp, isnan, log, sqrt
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

import numpy as np


cdef double _pairwise_sum(const double *a, Py_ssize_t n) noexcept nogil:
    """numpy's pairwise sum of float64 (its `DOUBLE_pairwise_sum`): below 8
    terms one after another; up to 128 eight running sums joined as a
    tree, then the rest; above that, the halves (cut at a multiple of 8)."""
    cdef Py_ssize_t i, j, half
    cdef double res
    cdef double r[8]
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    half = n // 2
    half -= half % 8
    return _pairwise_sum(a, half) + _pairwise_sum(a + half, n - half)


def pairwise_sum(const double[::1] values):
    """`values.sum()` as numpy computes it (for the tests)."""
    return _pairwise_sum(&values[0], values.shape[0]) if values.shape[0] else 0.0


def expansion_arrays(const int64_t[::1] active, const int64_t[::1] counts,
                     const double[:, ::1] per_xfer, double cost, bint everywhere):
    """(actions, costs, singles) of an expansion from the engine's step
    arrays (`Locations.step_arrays`): every candidate, xfer by xfer,
    location by location, with its cost; then, with `everywhere`, each
    xfer of two or more candidates as a multi-location action, its cost
    the graph's plus its candidates' gains (NaN and positive changes count
    as none) summed pairwise over the row."""
    cdef Py_ssize_t num = active.shape[0], width = per_xfer.shape[1]
    cdef Py_ssize_t i, l, k = 0, singles = 0, macros = 0
    cdef double change
    for i in range(num):
        if counts[i] < 0 or counts[i] > width:
            raise ValueError(f"xfer {active[i]} has {counts[i]} candidates; the rows hold {width}")
        singles += counts[i]
        macros += everywhere and counts[i] >= 2
    actions = np.empty((singles + macros, 2), np.int64)
    costs = np.empty(singles + macros)
    cdef int64_t[:, ::1] av = actions
    cdef double[::1] cv = costs
    for i in range(num):
        for l in range(counts[i]):
            av[k, 0] = active[i]
            av[k, 1] = l
            cv[k] = per_xfer[i, l]
            k += 1
    if not macros:
        return actions, costs, singles
    cdef double *gains = <double *> malloc(width * sizeof(double))
    if gains == NULL:
        raise MemoryError()
    try:
        for i in range(num):
            if counts[i] < 2:
                continue
            for l in range(width):
                change = per_xfer[i, l] - cost
                gains[l] = change if change < 0.0 else 0.0   # np.fmin(change, 0.0)
            av[k, 0] = active[i]
            av[k, 1] = -1
            cv[k] = cost + _pairwise_sum(gains, width)
            k += 1
    finally:
        free(gains)
    return actions, costs, singles


def xfer_cost_logits(const int64_t[:, ::1] actions, const double[::1] costs,
                     Py_ssize_t singles, double cost, double scale):
    """The `xfer` prior's logits (`XferCostPrior.logits_numpy`), `scale`
    being the initial cost times the temperature; None where the
    candidates are not listed xfer by xfer in ascending order (as an
    expansion lists them) or a cost is NaN."""
    cdef Py_ssize_t count = actions.shape[0], i, s, e, g, groups = 0, lo, hi, mid
    out = np.zeros(count)
    if singles == 0:
        return out
    cdef double[::1] ov = out
    if isnan(cost):
        return None
    for i in range(singles):
        if isnan(costs[i]) or (i and actions[i, 0] < actions[i - 1, 0]):
            return None
        groups += i == 0 or actions[i, 0] != actions[i - 1, 0]
    # values [singles], best [groups], log_p [groups], scratch [singles + groups]
    cdef double *values = <double *> malloc((2 * singles + 3 * groups) * sizeof(double))
    if values == NULL:
        raise MemoryError()
    cdef double *best = values + singles
    cdef double *log_p = best + groups
    cdef double *scratch = log_p + groups
    cdef Py_ssize_t *starts = <Py_ssize_t *> malloc((groups + 1) * sizeof(Py_ssize_t))
    if starts == NULL:
        free(values)
        raise MemoryError()
    cdef double top, lse
    try:
        g = 0
        for i in range(singles):
            values[i] = -100.0 * (costs[i] - cost) / scale
            if i == 0 or actions[i, 0] != actions[i - 1, 0]:
                starts[g] = i
                best[g] = values[i]
                g += 1
            elif values[i] > best[g - 1]:
                best[g - 1] = values[i]
        starts[groups] = singles
        # An xfer's log-probability: its best candidate's share of all.
        top = best[0]
        for g in range(1, groups):
            if best[g] > top:
                top = best[g]
        for g in range(groups):
            scratch[g] = exp(best[g] - top)
        lse = top + log(_pairwise_sum(scratch, groups))
        for g in range(groups):
            log_p[g] = best[g] - lse
        # A candidate's: its xfer's, plus its share within the xfer.
        for g in range(groups):
            s, e = starts[g], starts[g + 1]
            for i in range(s, e):
                scratch[i - s] = exp(values[i] - best[g])
            lse = best[g] + log(_pairwise_sum(scratch, e - s))
            for i in range(s, e):
                ov[i] = log_p[g] + values[i] - lse
        # A multi-location action: its xfer's log-probability, where the
        # xfer has a candidate.
        for i in range(singles, count):
            lo, hi = 0, groups - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if actions[starts[mid], 0] < actions[i, 0]:
                    lo = mid + 1
                else:
                    hi = mid
            if actions[starts[lo], 0] == actions[i, 0]:
                ov[i] = log_p[lo]
    finally:
        free(values)
        free(starts)
    return out


cdef bint _take(object array, Py_buffer *view, char kind) except -1:
    """Fills `view` with `array`'s buffer if it is one-dimensional,
    contiguous and of `kind` (b'd' float64, b'q' int64, b'?' bool); False,
    with nothing held, otherwise. A typed memoryview does the same checks
    but builds a Python object each time, and `select` takes five of them
    at every interior node of every simulation."""
    try:
        PyObject_GetBuffer(array, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, TypeError, ValueError):  # not contiguous, or no buffer at all
        return False
    cdef char f = view.format[0] if view.format != NULL else 0
    cdef bint ok = view.ndim == 1 and (
        (kind == b'd' and f == b'd' and view.itemsize == 8)
        or (kind == b'q' and (f == b'q' or f == b'l') and view.itemsize == 8)
        or (kind == b'?' and f == b'?' and view.itemsize == 1))
    if not ok:
        PyBuffer_Release(view)
    return ok


def select(node, double c_puct):
    """The index of the action pUCT takes at expanded `node` (the same as
    `select_numpy`'s); -1 if none is alive (its None), -2 where a value or
    a prior is NaN, or an array is not laid out as `Node` lays it out
    (numpy's rules then decide: those for NaN in min, max and argmax are
    not restated here)."""
    expansion = node.expansion
    arrays = (expansion.costs, node.prior, node.edge_visits, node.dead, node.root_only)
    cdef const char *kinds = b"ddq??"   # _select's order
    cdef Py_buffer views[5]
    cdef int i, taken = 0
    try:
        for i in range(5):
            if not _take(arrays[i], &views[i], kinds[i]):
                return -2
            taken += 1
        return _select(node, expansion, c_puct, views)
    finally:
        for i in range(taken):
            PyBuffer_Release(&views[i])


cdef Py_ssize_t _select(node, expansion, double c_puct, Py_buffer *views) except? -3:
    """`select` over the node's arrays, as `views` holds them (costs,
    prior, edge visits, dead, root only)."""
    cdef const double *costs = <const double *> views[0].buf
    cdef const double *prior = <const double *> views[1].buf
    cdef const int64_t *edge = <const int64_t *> views[2].buf
    cdef const unsigned char *dead = <const unsigned char *> views[3].buf
    cdef const unsigned char *root_only = <const unsigned char *> views[4].buf
    cdef Py_ssize_t count = views[0].shape[0]
    if (views[1].shape[0] != count or views[2].shape[0] != count
            or views[3].shape[0] != count or views[4].shape[0] != count):
        return -2
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
            if index < 0 or index >= count:
                return -2
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
