"""What the model-based generalist's dream offers where episodes start; prints JSON.

    python benchmarks/dream_masks_bench.py --results=results/generalist/analytic_v100/mb/seed0

Restores the world model a `train_generalist.py --agent=mb` run saved
(its latest round) and, per `--thresholds`, reports the share of dream
starts at the training graphs' initial graphs with at least one xfer the
world model predicts valid, and the mean number it offers, beside the mean
number the real engine finds valid there (`xflowrl.world_model.dream_start_masks`).
A threshold that offers nothing leaves the controller nothing to learn in
the dream: this is how `--mask_threshold`'s default for the distribution
was chosen (docs/agents.md).
"""

from __future__ import annotations

import json

from absl import app, flags

from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig
from xflowrl.generalist.distribution import training_env
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.world_model import DreamConfig, ModelBasedAgent, dream_start_masks

FLAGS = flags.FLAGS
flags.DEFINE_string("results", None, "A model-based generalist's seed folder.", required=True)
flags.DEFINE_string("cost_model", GPU_COST_SPEC, "Its cost model.")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Its rule set.")
flags.DEFINE_integer("max_steps", 30, "Its --max_steps.")
flags.DEFINE_list("thresholds", ["0.8", "0.5", "0.3"], "Mask thresholds to compare.")
flags.DEFINE_integer("starts", 256, "Dream starts per threshold.")


def main(argv):
    del argv
    env = training_env(XferSet.from_name(FLAGS.rules), cost_model_from_spec(FLAGS.cost_model),
                       EnvConfig(max_steps=FLAGS.max_steps,
                                 max_locations=DEFAULT_MAX_LOCATIONS))
    agent = ModelBasedAgent(env, FLAGS.results, dream=DreamConfig(), progress=lambda line: None)
    agent.restore_world_model()
    out = {"results": FLAGS.results, "round": agent.state.round,
           **dream_start_masks(agent, [float(t) for t in FLAGS.thresholds], FLAGS.starts)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    app.run(main)
