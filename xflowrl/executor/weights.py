"""Random weights that keep activations finite through deep graphs.

`executor.random_feeds` draws N(0, 1) for every leaf, which is right for
small rule patterns but overflows float32 through fifty convolutions. Here
each weight is drawn by the role its consumer gives it: He-normal for conv
and matmul weights (std sqrt(2 / fan_in)), batch-norm statistics near the
identity, small biases; graph inputs are N(0, 1).
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from xflowrl.engine.graph import Graph

_BN_ROLES = ("input", "scale", "bias", "mean", "var")


def random_weights(graph: Graph, seed: int = 0, dtype=np.float32,
                   gain: float = np.sqrt(2.0)) -> Dict[str, np.ndarray]:
    """A value for every weight op of `graph`, by name, drawn by role.

    Args:
      graph: the graph whose weights to draw.
      seed: numpy generator seed; equal seeds give equal weights.
      dtype: the values' dtype.
      gain: conv and matmul weights are `gain / sqrt(fan_in) * N(0, 1)`
        (He-normal by default). Attention without softmax (the zoo's BERT)
        is cubic in its input per layer: use a gain well below 1 there.

    Returns:
      weight name -> array of the weight's shape.
    """
    rng = np.random.default_rng(seed)
    ops = graph.ops()
    roles: Dict[int, str] = {}
    for op in ops:
        for slot, (guid, _) in enumerate(op.inputs):
            if op.type in ("conv2d", "matmul") and slot == 1:
                roles.setdefault(guid, "fan_in")
            elif op.type == "batchnorm" and slot > 0:
                roles.setdefault(guid, _BN_ROLES[slot])
            elif op.type == "broadcast_add" and slot == 1:
                roles.setdefault(guid, "bias")
    values = {}
    for op in ops:
        if op.type != "weight":
            continue
        shape = tuple(op.output_shapes[0])
        role = roles.get(op.guid, "other")
        if role == "fan_in":
            fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[-2]
            value = rng.standard_normal(shape) * (gain / np.sqrt(fan_in))
        elif role in ("scale", "var"):
            value = rng.uniform(0.5, 1.5, size=shape)
        elif role in ("bias", "mean"):
            value = 0.1 * rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape)
        values[op.name] = value.astype(dtype)
    return values


def random_inputs(graph: Graph, seed: int = 0, dtype=np.float32) -> Dict[str, np.ndarray]:
    """N(0, 1) values for every input op of `graph`, by name."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(dtype)
            for name, shape in graph.inputs().items()}
