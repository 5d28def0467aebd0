"""World-model training speed: where the model-based agent's
world-model phase spends its time.

    python benchmarks/world_model_bench.py [--graph=bert] [--rounds=2]
        [--episodes_per_round=20] [--train_steps_per_round=100]
        [--encoder_steps=100] [--cores=1]

Runs `ModelBasedAgent.learn_world_model` with random collection (the
thesis' collector; no controller, so only the world model's own work is
timed) and reports, as one JSON object: the phase's wall time; the time in
real environment steps (collection), in the latent encoder's training
(`latent.train_encoder`, its first step included), in the MDN-RNN's
training steps (`WorldModelLearner.step`; the first, which traces, apart
from the rest: `first_step_s`, `step_ms` median); and the rest (encoding
states, bookkeeping, evaluation, checkpoints). `--cores=1` pins the
process and TensorFlow's threads to one core before TensorFlow starts.
The dream's speed has its own benchmark (`dream_bench.py`).
"""

import json
import os
import tempfile
import time

from absl import app, flags
import numpy as np

from xflowrl.engine.cost import GPU_PROFILE  # no TensorFlow: --cores comes first

from timing import Clock, pin_cores

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "bert", "Zoo graph.")
flags.DEFINE_string("profile", GPU_PROFILE, "Analytic cost profile.")
flags.DEFINE_integer("rounds", 2, "Collection rounds.")
flags.DEFINE_integer("episodes_per_round", 20, "Random episodes per round.")
flags.DEFINE_integer("train_steps_per_round", 100, "World-model steps per round.")
flags.DEFINE_integer("encoder_steps", 100, "Latent encoder steps.")
flags.DEFINE_integer("cores", 1, "Pin to this many cores (0: leave alone).")
flags.DEFINE_integer("seed", 0, "Seed.")


def main(argv):
    del argv
    pin_cores(FLAGS.cores)
    # Imported here: --cores must take effect before TensorFlow starts.
    from xflowrl.entry_points import RunSettings  # pylint: disable=import-outside-toplevel
    from xflowrl.env import GraphEnv  # pylint: disable=import-outside-toplevel
    from xflowrl.world_model import (  # pylint: disable=import-outside-toplevel
        WorldModelConfig,
        latent,
    )
    from xflowrl.world_model import agent as agent_module
    from xflowrl.world_model.learning import (  # pylint: disable=import-outside-toplevel
        WorldModelLearner,
    )

    clock = Clock()
    patches = [(GraphEnv, "step", clock.wrap("env", GraphEnv.step)),
               (GraphEnv, "reset", clock.wrap("env", GraphEnv.reset)),
               (latent, "train_encoder", clock.wrap("encoder_training", latent.train_encoder)),
               (WorldModelLearner, "step", clock.wrap("model_step", WorldModelLearner.step))]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    env = RunSettings(graph=FLAGS.graph, profile=FLAGS.profile).make_env()
    config = WorldModelConfig(rounds=FLAGS.rounds, episodes_per_round=FLAGS.episodes_per_round,
                              train_steps_per_round=FLAGS.train_steps_per_round,
                              encoder_steps=FLAGS.encoder_steps, collection="random",
                              decay_steps=max(FLAGS.rounds * FLAGS.train_steps_per_round, 1))
    try:
        with tempfile.TemporaryDirectory() as logdir:
            agent = agent_module.ModelBasedAgent(env, logdir, config, seed=FLAGS.seed,
                                                 progress=lambda line: None)
            start = time.perf_counter()
            agent.learn_world_model()
            total = time.perf_counter() - start
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
    seconds = clock.seconds
    model_steps = np.asarray(clock.durations.get("model_step", []))
    rest = total - sum(seconds.values())
    print(json.dumps({
        "benchmark": "world_model", "graph": FLAGS.graph, "profile": FLAGS.profile,
        "cores": FLAGS.cores or os.cpu_count(), "rounds": FLAGS.rounds,
        "episodes_per_round": FLAGS.episodes_per_round,
        "train_steps_per_round": FLAGS.train_steps_per_round,
        "encoder_steps": FLAGS.encoder_steps, "seconds": total,
        "env_s": seconds.get("env", 0.0),
        "encoder_training_s": seconds.get("encoder_training", 0.0),
        "model_steps": int(len(model_steps)), "model_steps_s": float(model_steps.sum()),
        "first_step_s": float(model_steps[0]) if len(model_steps) else None,
        "step_ms": float(1000 * np.median(model_steps[1:])) if len(model_steps) > 1 else None,
        "other_s": rest}, indent=1))


if __name__ == "__main__":
    app.run(main)
