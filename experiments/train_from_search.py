"""Learning from search: the engine planner teaches a policy (self-play,
reanalyse, learning), starting from a policy folder.

    python experiments/train_from_search.py                        # corpus train split
    python experiments/train_from_search.py --graph=vit/l2h128p64  # fine-tuning on one graph
    python experiments/train_from_search.py --quick                # a first look in a minute

Each iteration: engine-planner runs with the current policy as prior on
--graphs_per_iteration graphs of the corpus' training split (or on
--graph), on --actors Ray actors (0: in this process); their trees become
targets (Gumbel's improved policy from the exact completed values, the
value as the points still to gain below each graph) kept in the run's
store; --reanalyse_states stored states are searched again with the
current policy; the network takes --learn_steps steps on every stored state
and is saved as a policy folder (`xflowrl.planning.search_training`).

Writes to --out_dir: run.json (the config, per iteration the real steps of
self-play and reanalyse, the losses before and after learning, the
self-play results; rerun with the same flags to resume after the last
finished iteration), store/ (the search states) and
policies/iteration_NNN/ (policy folders: `xflowrl optimize
--method=plan:DIR`, `--method=policy:DIR`, `PlanConfig(prior="policy:DIR")`).
The latest is also copied to --out_dir/policy.
"""

import os
import shutil
import sys

from absl import app, flags

from xflowrl.planning.learner import LearnConfig
from xflowrl.planning.search import PlanConfig
from xflowrl.planning.search_targets import TargetConfig
from xflowrl.planning.search_training import SearchTrainingConfig, train_from_search
from xflowrl.policy import SHIPPED

FLAGS = flags.FLAGS
flags.DEFINE_string("policy", SHIPPED, "The policy folder to start from (default: the "
                    "shipped generalist).")
flags.DEFINE_string("graph", "", "One corpus graph to fine-tune on (default: the corpus' "
                    "training split).")
flags.DEFINE_integer("iterations", 3, "Self-play, reanalyse and learning rounds.")
flags.DEFINE_integer("graphs_per_iteration", 4, "Self-play runs per iteration (graphs drawn "
                     "from the training split).")
flags.DEFINE_string("rules", "default", "Rule set (the policy's).")
flags.DEFINE_string("cost_model", "analytic/v100", "Cost model, BACKEND/PROFILE.")
flags.DEFINE_enum("space", "thesis", ["thesis", "deployed"], "Action space: one substitution "
                  "per action, or with multi-location actions and identical ops merged.")
flags.DEFINE_integer("simulations", 16, "Simulations per decision.")
flags.DEFINE_integer("max_real_steps", 200, "Real steps (expansions) per self-play run.")
flags.DEFINE_integer("real_step_budget", 0, "Real steps of self-play and reanalyse in all "
                     "(0: no bound).")
flags.DEFINE_enum("policy_target", "improved", ["improved", "visits"], "Policy target.")
flags.DEFINE_enum("value_target", "best_below", ["best_below", "n_step"], "Value target.")
flags.DEFINE_enum("states", "expanded", ["expanded", "roots"], "Which graphs of a tree "
                  "become training states.")
flags.DEFINE_integer("learn_steps", 50, "Gradient steps per iteration.")
flags.DEFINE_integer("batch_size", 16, "States per gradient step.")
flags.DEFINE_float("learning_rate", 5e-4, "Adam's learning rate.")
flags.DEFINE_integer("reanalyse_states", 0, "Stored states searched again per iteration.")
flags.DEFINE_integer("actors", 0, "Ray actors for self-play and reanalyse (0: this process).")
flags.DEFINE_integer("seed", 0, "Seed of graph draws, planners and learners.")
flags.DEFINE_string("out_dir", "results/train_from_search", "Results folder.")
flags.DEFINE_bool("quick", False, "Two iterations of one small graph, 30 real steps each, "
                  "5 learning steps (eager), 2 states reanalysed.")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def config_from_flags() -> SearchTrainingConfig:
    everywhere = FLAGS.space == "deployed"
    plan = PlanConfig(simulations=FLAGS.simulations, max_real_steps=FLAGS.max_real_steps,
                      time_limit_s=600, everywhere=everywhere, merge_identical=everywhere)
    config = SearchTrainingConfig(
        policy=FLAGS.policy, graphs=(FLAGS.graph,) if FLAGS.graph else (),
        graphs_per_iteration=1 if FLAGS.graph else FLAGS.graphs_per_iteration,
        iterations=FLAGS.iterations, rules=FLAGS.rules, cost_model=FLAGS.cost_model, plan=plan,
        targets=TargetConfig(policy=FLAGS.policy_target, value=FLAGS.value_target,
                             states=FLAGS.states),
        learn=LearnConfig(steps=FLAGS.learn_steps, batch_size=FLAGS.batch_size,
                          learning_rate=FLAGS.learning_rate),
        reanalyse_states=FLAGS.reanalyse_states,
        real_step_budget=FLAGS.real_step_budget or None, actors=FLAGS.actors, seed=FLAGS.seed)
    if FLAGS.quick:
        config = SearchTrainingConfig(
            policy=FLAGS.policy, graphs=(FLAGS.graph or "squeezenet/f2w8",),
            graphs_per_iteration=1, iterations=2, rules=FLAGS.rules,
            cost_model=FLAGS.cost_model, plan=PlanConfig(simulations=8, max_real_steps=30),
            learn=LearnConfig(steps=5, batch_size=8, compiled=False), reanalyse_states=2,
            actors=FLAGS.actors, seed=FLAGS.seed)
    return config


def main(argv):
    del argv
    config = config_from_flags()
    run = train_from_search(config, FLAGS.out_dir, _say)
    latest = os.path.join(FLAGS.out_dir, "policy")
    if run.iterations:
        if os.path.exists(latest):
            shutil.rmtree(latest)
        shutil.copytree(run.policy, latest)
    _say(f"done: {len(run.iterations)} iterations, {run.real_steps} real steps; policy "
         f"{latest if run.iterations else run.policy}; record "
         f"{os.path.join(FLAGS.out_dir, 'run.json')}")


if __name__ == "__main__":
    app.run(main)
