"""numpy Generators in an object-based TensorFlow checkpoint.

A seeded run reproduces only if a resumed run draws what the uninterrupted
run would have drawn next, so the sampling generators' positions must
survive an interruption with the weights they belong to. `GeneratorStates`
puts named `np.random.Generator`s into a `tf.train.Checkpoint` as one JSON
string (their `bit_generator.state`; PCG64's 128-bit integers are exact in
JSON): `save`/`write` record where each generator stands, `restore`/`read`
put each generator back there in place, so whoever holds a generator sees
the restored one. It is written in the same file as the checkpoint's
variables, so weights and generators never come from different moments.
"""

from __future__ import annotations

import json
from typing import Mapping

import numpy as np
import tensorflow as tf


class GeneratorStates(tf.train.experimental.PythonState):
    """Named numpy generators, checkpointed by their bit generators' states."""

    def __init__(self, generators: Mapping[str, np.random.Generator]):
        self.generators = dict(generators)

    def serialize(self) -> str:
        return json.dumps({name: g.bit_generator.state
                           for name, g in sorted(self.generators.items())})

    def deserialize(self, string_value) -> None:
        """Puts every generator back where the checkpoint found it.

        Raises:
          ValueError: the checkpoint names other generators, or another
            kind of bit generator.
        """
        if isinstance(string_value, bytes):
            string_value = string_value.decode()
        saved = json.loads(string_value)
        if set(saved) != set(self.generators):
            raise ValueError(f"the checkpoint holds the generators {sorted(saved)}, this "
                             f"program has {sorted(self.generators)}")
        for name, state in saved.items():
            bit_generator = self.generators[name].bit_generator
            kind = type(bit_generator).__name__
            if state.get("bit_generator") != kind:
                raise ValueError(f"generator {name!r}: the checkpoint holds a "
                                 f"{state.get('bit_generator')} state, this program a {kind}")
            bit_generator.state = state
