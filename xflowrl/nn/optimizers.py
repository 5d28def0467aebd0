"""Optimizer helpers both agents' learners use.

`build_adam(optimizer, variables)` creates a Sonnet Adam's moments before
its first update, so that a checkpoint restores into them and a traced
update creates no variables (`xflowrl.tracing`).
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import sonnet as snt
import tensorflow as tf


def build_adam(optimizer: snt.optimizers.Adam, variables: Sequence[tf.Variable]) -> None:
    """Creates `optimizer`'s moments for `variables` and changes nothing.

    Sonnet's Adam creates its moments on its first `apply`, and a checkpoint
    can only be restored into variables that exist. Through the public API
    only: one `apply` of an update that touches no entry (an empty
    `tf.IndexedSlices` for one variable, None for the others), then the
    step counter is put back. Variables, moments (zeros) and step are as
    before. Does nothing once the moments exist.
    """
    if optimizer.m:
        return
    variables = list(variables)
    target = next((i for i, v in enumerate(variables) if v.shape.rank), None)
    if target is None:
        raise ValueError("build_adam needs at least one variable of rank >= 1")
    var = variables[target]
    empty = tf.IndexedSlices(tf.zeros([0] + var.shape.as_list()[1:], var.dtype),
                             tf.zeros([0], tf.int64), tf.shape(var, out_type=tf.int64))
    updates: List[Optional[tf.IndexedSlices]] = [None] * len(variables)
    updates[target] = empty
    step = optimizer.step.numpy()
    optimizer.apply(updates, variables)
    optimizer.step.assign(step)
