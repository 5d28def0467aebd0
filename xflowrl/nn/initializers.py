"""Explicitly seeded weight initializers: no global TensorFlow seed.

Sonnet's default initializers draw from TensorFlow's stateful random ops,
which are reproducible only under a global `tf.random.set_seed` and only if
every random op of the process runs in the same order. `SeededInitializers`
instead hands out initializers that draw with stateless ops from keys
derived from one explicit seed: the network owns its randomness, and two
networks built from the same seed in one process get the same weights.

Each initializer handed out is a stream of its own (its key is fixed when it
is handed out, in the network's constructor); its successive calls (the
layers of one MLP, in order) draw successive keys of that stream. So a
module's weights do not depend on when other modules create theirs.

The distributions are Sonnet's defaults: `fan_in()` is `snt.Linear`'s
(truncated normal, stddev 1/sqrt(fan in)), `unit()` is `snt.Embed`'s
(truncated normal, stddev 1); biases and layer norms keep their constant
initializers.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf


class _StatelessTruncatedNormal(snt.initializers.Initializer):
    """Truncated normal (2 stddevs) drawn by a stateless op; see the module."""

    def __init__(self, key: Sequence[int], stddev: Optional[float]):
        """`stddev`: None is 1/sqrt(shape[0]) (the fan in of a [in, out] weight)."""
        self._key = tuple(key)
        self._stddev = stddev
        self._calls = 0

    def __call__(self, shape, dtype: tf.DType) -> tf.Tensor:
        shape = [int(d) for d in shape]
        stddev = self._stddev if self._stddev is not None else 1.0 / math.sqrt(shape[0])
        words = np.random.SeedSequence(self._key + (self._calls,)).generate_state(2)
        self._calls += 1
        return tf.random.stateless_truncated_normal(
            shape, seed=tf.constant(words.astype(np.int64)), stddev=stddev, dtype=dtype)


class SeededInitializers:
    """Hands out initializers whose draws depend only on `seed` and the order
    in which they are handed out (see the module docstring)."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._streams = 0

    def _key(self):
        key = (self.seed, self._streams)
        self._streams += 1
        return key

    def fan_in(self) -> snt.initializers.Initializer:
        """For linear weights [in, out]: stddev 1/sqrt(in), as `snt.Linear`."""
        return _StatelessTruncatedNormal(self._key(), stddev=None)

    def unit(self) -> snt.initializers.Initializer:
        """For embedding tables: stddev 1, as `snt.Embed`."""
        return _StatelessTruncatedNormal(self._key(), stddev=1.0)
