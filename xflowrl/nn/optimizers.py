"""Optimizer helpers both agents' learners use.

`build_adam(optimizer, variables)` creates a Sonnet Adam's moments before
its first update, so that a checkpoint restores into them and a traced
update creates no variables (`xflowrl.tracing`).

`apply_adam(optimizer, updates, variables)` is Sonnet's `Adam.apply`, bit
for bit, with the dense updates' arithmetic done once over their
concatenation instead of once per variable. Sonnet builds about thirty ops
per variable, and a learner's step is traced afresh for every new agent:
fewer ops make a shorter trace (benchmarks/adam_bench.py times both on a
PPO network's variables and checks that training ends at the same weights).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

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


def apply_adam(optimizer: snt.optimizers.Adam, updates: Sequence[Optional[tf.Tensor]],
               variables: Sequence[tf.Variable]) -> None:
    """`optimizer.apply(updates, variables)`, with the same result to the bit.

    Every entry of a variable and of its moments goes through Sonnet's
    `adam_update` arithmetic in the same order of operations, so the
    values are identical; only the dense updates (plain tensors) are
    flattened and concatenated, per dtype, and updated by one pass of the
    rule. Sparse updates (`tf.IndexedSlices`, the gradients of gathers)
    keep Sonnet's own path, which updates only the rows they touch; None
    skips its variable. The step counter advances once, as in Sonnet.
    Needs the moments (`build_adam`), which it creates where they are
    missing when run eagerly; a traced update creates no variables.
    """
    updates, variables = list(updates), list(variables)
    if len(updates) != len(variables):
        raise ValueError(f"{len(updates)} updates for {len(variables)} variables")
    if not variables:
        raise ValueError("no variables to update")
    if all(u is None for u in updates):
        raise ValueError("no update for any variable")
    for u, v in zip(updates, variables):
        if u is not None and u.dtype != v.dtype:
            raise ValueError(f"an update of dtype {u.dtype.name} for {v.name} of dtype "
                             f"{v.dtype.name}")
    if not optimizer.m:
        if not tf.executing_eagerly():
            raise ValueError("the optimizer has no moments: call build_adam(optimizer, "
                             "variables) before tracing an update")
        build_adam(optimizer, variables)
    dense = {i: u for i, u in enumerate(updates)
             if u is not None and not isinstance(u, tf.IndexedSlices)}
    sparse = [u if isinstance(u, tf.IndexedSlices) else None for u in updates]
    if any(u is not None for u in sparse):
        optimizer.apply(sparse, variables)  # advances the step
    else:
        optimizer.step.assign_add(1)
    by_dtype: Dict[tf.DType, List[int]] = {}
    for i, u in dense.items():
        by_dtype.setdefault(u.dtype, []).append(i)
    for dtype, group in by_dtype.items():
        # Sonnet's adam_update on the concatenation (its order of operations).
        alpha = tf.cast(optimizer.learning_rate, dtype)
        beta_1 = tf.cast(optimizer.beta1, dtype)
        beta_2 = tf.cast(optimizer.beta2, dtype)
        epsilon = tf.cast(optimizer.epsilon, dtype)
        t = tf.cast(optimizer.step, dtype)

        def flat(tensors):
            return tf.concat([tf.reshape(x, [-1]) for x in tensors], 0)

        g = flat([dense[i] for i in group])
        m = flat([optimizer.m[i] for i in group])
        v = flat([optimizer.v[i] for i in group])
        m = beta_1 * m + (1. - beta_1) * g
        v = beta_2 * v + (1. - beta_2) * g * g
        m_hat = m / (1. - tf.pow(beta_1, t))
        v_hat = v / (1. - tf.pow(beta_2, t))
        step = alpha * m_hat / (tf.sqrt(v_hat) + epsilon)
        sizes = [variables[i].shape.num_elements() for i in group]
        for i, d, new_m, new_v in zip(group, tf.split(step, sizes), tf.split(m, sizes),
                                      tf.split(v, sizes)):
            shape = variables[i].shape
            variables[i].assign_sub(tf.reshape(d, shape))
            optimizer.m[i].assign(tf.reshape(new_m, shape))
            optimizer.v[i].assign(tf.reshape(new_v, shape))
