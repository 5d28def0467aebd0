"""Suite-wide settings, applied before any test touches TensorFlow.

TensorFlow runs the independent ops of one graph concurrently (inter-op
parallelism), and under load the order they finish in can change which of
two equal-precision float sums is rounded first: the same seed's first PPO
update then differs in the last bit of a loss, and sampled actions may part
later (CI saw it in `agent_test`'s resume test, about one run in three on a
loaded machine; with one inter-op thread it passed every time). The tests
that promise "to the bit" (resumed runs of the agents and the world model)
are about what a checkpoint restores, not TensorFlow's scheduling, so the
suite runs ops one graph node at a time. Intra-op threads (the cores one
op's kernel uses) stay at TensorFlow's default.
"""

import tensorflow as tf

tf.config.threading.set_inter_op_parallelism_threads(1)
