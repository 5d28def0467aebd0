"""One trace per function: `tf.function`s whose signatures leave the batch open.

A `tf.function` traces again for every new input shape it meets (or, with
`reduce_retracing`, once more to generalise), and a trace of the agents'
networks costs seconds: a short training run spent most of its time there.
`traced_once(fn)` traces `fn` on its first call for inputs of
any leading (batch, node, edge) dimension — `relaxed_spec` of the first
call's arguments — so every later call with the same structure reuses that
one graph. Autograph is off: the traced code branches on Python values only
(configuration, which inputs are None), never on tensors.

Importing this module turns grappler's arithmetic optimiser off for the
process (`REPRODUCIBLE_GRAPPLER`): with it on, a traced function given the
same inputs and weights can compute differently from one process to the
next, so that two runs of one seed differ in the last bits of a loss and
then part (measured with
`benchmarks/repro_bench.py`: `train_mf.py --quick` differed in every pair
of runs, also with one-thread pools and with oneDNN off, and agreed to the
bit with it off). Grappler's other passes stay on. The modules that trace
(the agents' acting and learning, the world model's learners, the
planners' learners) import this one. Runtime measurements of a
user's graph in TensorFlow (`xflowrl.measure`) run inside
`grappler_defaults()`: as the user's TensorFlow runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf

# Grappler's options that keep a traced function's arithmetic the same in
# every process (see the module docstring).
REPRODUCIBLE_GRAPPLER: Dict[str, bool] = {"arithmetic_optimization": False}


def use_reproducible_grappler() -> None:
    """Sets `REPRODUCIBLE_GRAPPLER` on this process's TensorFlow (done on
    import; the other grappler options are left as they are)."""
    tf.config.optimizer.set_experimental_options(REPRODUCIBLE_GRAPPLER)


use_reproducible_grappler()


@contextlib.contextmanager
def grappler_defaults() -> Iterator[None]:
    """TensorFlow's own defaults for the options of `REPRODUCIBLE_GRAPPLER`
    while inside (functions called there are optimised as a user's
    TensorFlow optimises them); `use_reproducible_grappler()` on leaving."""
    tf.config.optimizer.set_experimental_options({k: None for k in REPRODUCIBLE_GRAPPLER})
    try:
        yield
    finally:
        use_reproducible_grappler()


class OpenSpec:
    """Maps a tensor or array to the `tf.TensorSpec` it is traced with: every
    dimension unknown but the last of a float tensor of rank
    `width_from_rank` or more (the feature width that the networks' layers
    are built for); other leaves (None, Python numbers, strings) are
    returned as they are. `TracedFunction` reads `width_from_rank` to key
    its fast path by exactly what the spec fixes."""

    def __init__(self, width_from_rank: int):
        self.width_from_rank = width_from_rank

    def __call__(self, leaf: Any) -> Any:
        if not isinstance(leaf, (tf.Tensor, np.ndarray)):
            return leaf
        dtype = tf.as_dtype(leaf.dtype)
        shape: List[Optional[int]] = [None] * len(leaf.shape)
        if dtype.is_floating and len(shape) >= self.width_from_rank:
            shape[-1] = int(leaf.shape[-1])
        return tf.TensorSpec(shape, dtype)


# Every dimension open but the last of a float tensor of rank 2 or more:
# batch sizes, node and edge counts, candidate rows and locations may change
# without a new trace.
relaxed_spec = OpenSpec(2)

# For batches of padded sequences: every dimension open but the last of a
# float tensor of rank 3 or more ([batch, time, features]); [batch, time]
# floats (rewards, weights) are open in both, so that the padded length may
# change without a new trace.
sequence_spec = OpenSpec(3)


def _is_tensor(leaf: Any) -> bool:
    return isinstance(leaf, (tf.Tensor, np.ndarray))


def _structure(x: Any) -> Any:
    """The nesting of `args` as hashable types (what `tf.nest` recurses
    into: sequences and mappings), a few microseconds where `tf.nest`'s
    own structure comparison takes a hundred."""
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_structure(v) for v in x))
    if isinstance(x, dict):
        return (type(x), tuple((k, _structure(x[k])) for k in sorted(x)))
    return None


_FLOATING: Dict[Any, bool] = {}


def _is_floating(dtype: Any) -> bool:
    known = _FLOATING.get(dtype)
    if known is None:
        known = _FLOATING[dtype] = tf.as_dtype(dtype).is_floating
    return known


def _describe(leaf: Any, width_from_rank: Optional[int]) -> Any:
    """A leaf as the cheap key sees it: a tensor's dtype, rank and the
    dimension its signature fixes (the last of a float tensor of rank
    `width_from_rank` or more; any last dimension where the spec is not an
    `OpenSpec`), any other leaf's repr. Equal keys mean one trace; the other
    dimensions (batch, nodes, edges, candidate rows) stay out of the key, or
    every new size would miss the fast path."""
    if isinstance(leaf, (tf.Tensor, np.ndarray)):
        shape = leaf.shape
        rank = len(shape)
        if width_from_rank is None:
            fixed = shape[-1] if rank else None
        elif rank >= width_from_rank and _is_floating(leaf.dtype):
            fixed = shape[-1]
        else:
            fixed = None
        return (leaf.dtype, rank, fixed)
    return repr(leaf)


@dataclasses.dataclass
class _Trace:
    function: Any                 # the tf.function
    concrete: Any = None          # its one concrete function, after the first call


class TracedFunction:
    """`fn` as `tf.function`s with relaxed input signatures, one per
    structure of the arguments.

    The arguments are flattened (`tf.nest`): tensors and arrays become the
    traced function's inputs, with `relaxed_spec` signatures; every other
    leaf (None where an optional tensor is absent, a Python number) is
    fixed in that trace. `spec` maps a tensor to its signature
    (`relaxed_spec` by default). A call whose structure, dtypes, ranks, float
    widths or other leaves differ from every earlier call's traces once
    more; `tracing_count` says how often that happened.
    """

    def __init__(self, fn: Callable[..., Any],
                 spec: Callable[[Any], Any] = relaxed_spec):
        self._fn = fn
        self._spec = spec
        self._width_from_rank: Optional[int] = getattr(spec, "width_from_rank", None)
        self.slow_calls = 0  # calls through tf.function's own call (see __call__)
        self._functions: Dict[Any, Any] = {}  # input signature -> tf.function
        self._entries: Dict[Any, _Trace] = {}  # cheap key of a call -> its trace

    def __call__(self, *args):
        leaves = tf.nest.flatten(args)
        tensors = [leaf for leaf in leaves if _is_tensor(leaf)]
        fast_key = (_structure(args),
                    tuple(_describe(leaf, self._width_from_rank) for leaf in leaves))
        entry = self._entries.get(fast_key)
        if entry is None:
            entry = self._entry(args, leaves, tensors)
            self._entries[fast_key] = entry
        if entry.concrete is not None and tf.executing_eagerly():
            # The fast path: `tf.function.__call__` binds and type-checks its
            # inputs against the signature in Python, about a millisecond a
            # call with a dozen inputs, more than the networks' arithmetic of
            # one acting step. The key already fixes every input's dtype,
            # rank and float width, which is all the signature checks.
            inputs = [tf.convert_to_tensor(t) for t in tensors]
            return entry.concrete._call_flat(  # pylint: disable=protected-access
                inputs, entry.concrete.captured_inputs)
        self.slow_calls += 1
        out = entry.function(*tensors)
        if entry.concrete is None:
            # After the first call: a function whose first trace made
            # variables has traced again by now (see the class docstring).
            entry.concrete = entry.function.get_concrete_function()
        return out

    def _entry(self, args, leaves, tensors) -> "_Trace":
        specs = [self._spec(leaf) for leaf in tensors]
        others = tuple(repr(leaf) for leaf in leaves if not _is_tensor(leaf))
        key = (repr(tf.nest.map_structure(lambda _: 0, args)), tuple(map(repr, specs)), others)
        function = self._functions.get(key)
        if function is None:
            function = self._trace(args, leaves, specs)
            self._functions[key] = function
        return _Trace(function)

    def _trace(self, args, leaves, specs):
        # The first call's arrays are not kept: only which leaves are inputs.
        fixed = [None if _is_tensor(leaf) else leaf for leaf in leaves]
        is_input = [_is_tensor(leaf) for leaf in leaves]
        structure = tf.nest.map_structure(lambda _: 0, args)

        def flat(*tensors):
            supplied = iter(tensors)
            full = [next(supplied) if tensor else value for tensor, value in zip(is_input, fixed)]
            return self._fn(*tf.nest.pack_sequence_as(structure, full))

        return tf.function(flat, input_signature=specs, autograph=False)

    @property
    def tracing_count(self) -> int:
        return sum(f.experimental_get_tracing_count() for f in self._functions.values())


def traced_once(fn: Callable[..., Any],
                spec: Callable[[Any], Any] = relaxed_spec) -> TracedFunction:
    """`TracedFunction(fn, spec)`: see the module docstring; `spec` says
    which dimensions stay known (`relaxed_spec`, or `sequence_spec` for
    padded sequences)."""
    return TracedFunction(fn, spec)
