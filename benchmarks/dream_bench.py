"""Dream speed: the world model's imagined step (batched) against the real step.

    python benchmarks/dream_bench.py [--graph=resnet50] [--rounds=30]
        [--batch_sizes=1,64,256,1024] [--seed=0]

The thesis reported 10 ms per dream step against 850 ms per real step on
ResNet-50; the target here is <= 0.2 ms per imagined step. Speed does not
depend on training, so the world model is untrained: the vocabulary (M
known xfers) comes from a few random rollouts of the real environment, the
latent encoder only gives z_0 and the MDN-RNN's variables are built by the
first dream call. So that every measured call is a full step of every
episode of the batch, the dream never predicts an end (done_threshold=1.1)
and predicts every known xfer valid (mask_threshold=0.0); its episodes run
to the step limit and are reset (untimed) then.

Timed, interleaved in rounds so both sides see the same machine load (round
i: `--real_steps_per_round` real steps, then `--dream_calls_per_round` dream
calls at each batch size, the batch sizes in a rotating order):

- real step: `GraphEnv.step` with a random valid action (enumeration of the
  candidates, their costs and featurization); resets untimed.
- dream call: `BatchedDream.step` for the whole batch (the MDN-RNN step, the
  mixture sample, the mask decoder and the numpy bookkeeping); the action
  per row is the first valid known xfer at location 0 (NO-OP if none),
  picked in numpy and timed apart (`pick_ms`); no controller.
- imagined step: call ms / batch size.

Prints one JSON object: medians with the 10th and 90th percentiles.
"""

import json
import os
import platform
import time

from absl import app, flags
import numpy as np
import tensorflow as tf

from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import DEFAULT_MAX_STEPS, EnvConfig, GraphEnv
from xflowrl.world_model import (
    BatchedDream,
    DreamConfig,
    LatentEncoder,
    MDNRNN,
    WorldModelConfig,
    XferVocabulary,
    collect_rollouts,
)
from xflowrl.world_model.data import real_steps

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "resnet50", "Zoo graph.")
flags.DEFINE_integer("rounds", 30, "Interleaved measurement rounds.")
flags.DEFINE_list("batch_sizes", ["1", "64", "256", "1024"], "Dream batch sizes.")
flags.DEFINE_integer("seed", 0, "Seeds the rollouts, the model and the dream.")
flags.DEFINE_integer("real_steps_per_round", 10, "Timed real steps per round.")
flags.DEFINE_integer("dream_calls_per_round", 20, "Timed dream calls per batch size per round.")
flags.DEFINE_integer("collect_episodes", 20, "Random rollouts that fix the vocabulary.")
flags.DEFINE_integer("max_steps", DEFAULT_MAX_STEPS, "Step limit of real and imagined episodes.")

THESIS = {"graph": "resnet50", "dream_step_ms": 10.0, "real_step_ms": 850.0}
TARGET_IMAGINED_STEP_MS = 0.2
WARMUP_CALLS = 3  # traces the tf.function for the shape, warms the allocator


def _stats(ms):
    ms = np.asarray(ms, np.float64)
    return {"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)), "n": int(len(ms))}


def pick_actions(xfer_mask: np.ndarray) -> np.ndarray:
    """[B, 2] actions: per row the first valid known xfer at location 0
    (valid: a predicted-valid xfer has at least one location), else NO-OP.

    Args:
      xfer_mask: [B, M+1] bool, NO-OP last.
    """
    known = xfer_mask[:, :-1]
    noop = known.shape[1]
    xfer = np.where(known.any(axis=1), known.argmax(axis=1), noop)
    return np.stack([xfer, np.zeros_like(xfer)], axis=1)


class _DreamRunner:
    """One dream batch of a fixed size, kept running across rounds."""

    def __init__(self, dream: BatchedDream, batch_size: int, max_steps: int):
        self.dream = dream
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.call_ms, self.pick_ms, self.live_fraction = [], [], []
        self.resets = 0
        self._reset()

    def _reset(self):
        self.batch = self.dream.reset(self.batch_size)
        self.steps = 0
        self.resets += 1

    def call(self, record: bool = True):
        if self.batch.dones.all() or self.steps >= self.max_steps:
            self._reset()
        start = time.perf_counter()
        actions = pick_actions(self.batch.xfer_mask)
        picked = time.perf_counter()
        live = ~self.batch.dones
        self.batch = self.dream.step(actions)
        end = time.perf_counter()
        self.steps += 1
        if record:
            self.pick_ms.append(1e3 * (picked - start))
            self.call_ms.append(1e3 * (end - picked))
            self.live_fraction.append(float(live.mean()))


def main(argv):
    del argv
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    graph = zoo.get_graph(FLAGS.graph)
    env = GraphEnv(graph, XferSet.default(), CostModel("analytic"),
                   EnvConfig(max_steps=FLAGS.max_steps))

    # -- the world model (untrained: speed only) ------------------------------
    rollouts = collect_rollouts(env, FLAGS.collect_episodes,
                                RandomAgent.thesis_collector(FLAGS.seed))
    vocab = XferVocabulary.from_rollouts(rollouts, env.num_xfers)
    if vocab.size == 0:
        raise app.UsageError(f"no xfer applies to {FLAGS.graph} in the random rollouts")
    wm_config = WorldModelConfig()
    encoder = LatentEncoder(wm_config.latent_size, vocab.size,
                            wm_config.encoder_message_passing_steps, seed=FLAGS.seed)
    initial_latent = encoder.encode([env.reset().state])[0]
    max_locations = env.config.max_locations
    model = MDNRNN(wm_config, vocab.size, max_locations, seed=FLAGS.seed)
    dream_config = DreamConfig(done_threshold=1.1, mask_threshold=0.0)
    runners = [_DreamRunner(BatchedDream(model, initial_latent, dream_config, FLAGS.max_steps,
                                         max_locations, seed=FLAGS.seed), b, FLAGS.max_steps)
               for b in batch_sizes]
    for runner in runners:
        for _ in range(WARMUP_CALLS):
            runner.call(record=False)

    # -- interleaved rounds ---------------------------------------------------
    agent = RandomAgent(seed=FLAGS.seed)
    obs = env.reset()
    env.step(agent.act(obs))  # warm the per-op cost memo
    obs, real_ms, real_resets = env.reset(), [], 0
    for i in range(FLAGS.rounds):
        for _ in range(FLAGS.real_steps_per_round):
            action = agent.act(obs)
            start = time.perf_counter()
            obs, _, done, _ = env.step(action)
            real_ms.append(1e3 * (time.perf_counter() - start))
            if done:
                obs = env.reset()
                real_resets += 1
        k = i % len(runners)
        for runner in runners[k:] + runners[:k]:
            for _ in range(FLAGS.dream_calls_per_round):
                runner.call()

    # -- report ---------------------------------------------------------------
    real = _stats(real_ms)
    dream_report = {}
    for runner in runners:
        b = runner.batch_size
        dream_report[str(b)] = {
            "call": _stats(runner.call_ms),
            "imagined_step": _stats(np.asarray(runner.call_ms) / b),
            "pick_ms": _stats(runner.pick_ms),
            "live_fraction": float(np.mean(runner.live_fraction)),
            "resets": runner.resets,
        }
    largest = dream_report[str(max(batch_sizes))]["imagined_step"]["median_ms"]
    report = {
        "benchmark": "dream",
        "graph": FLAGS.graph,
        "ops": graph.num_ops(),
        "num_real_xfers": env.num_xfers,
        "vocabulary_size_M": vocab.size,
        "max_locations_L": max_locations,
        "max_steps": FLAGS.max_steps,
        "collection": {"episodes": FLAGS.collect_episodes, "real_steps": real_steps(rollouts)},
        "world_model": "untrained (speed only)",
        "world_model_sizes": {"latent": wm_config.latent_size, "lstm": wm_config.lstm_size,
                              "mixtures": wm_config.mixtures},
        "dream_config": {"done_threshold": dream_config.done_threshold,
                         "mask_threshold": dream_config.mask_threshold,
                         "note": "never predicted done, every known xfer valid: every "
                                 "timed call is a full step of every episode"},
        "dream_actions": "first valid known xfer at location 0 per row (numpy; no controller)",
        "rounds": FLAGS.rounds,
        "real_steps_per_round": FLAGS.real_steps_per_round,
        "dream_calls_per_round": FLAGS.dream_calls_per_round,
        "real_step": {**real, "resets": real_resets},
        "dream": dream_report,
        "largest_batch": max(batch_sizes),
        "real_over_imagined_step_at_largest_batch": real["median_ms"] / largest,
        "target_imagined_step_ms": TARGET_IMAGINED_STEP_MS,
        "target_met": largest <= TARGET_IMAGINED_STEP_MS,
        "thesis": {**THESIS, "ratio": THESIS["real_step_ms"] / THESIS["dream_step_ms"]},
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)),
            "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "tf_threads_note": "0 means TensorFlow's default (all usable cores)",
            "tensorflow": tf.__version__,
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
