"""Trains one agent over a distribution of graphs and evaluates it
zero-shot on graphs it never saw.

    python experiments/train_generalist.py                       # GPU-like profile, seed 0
    python experiments/train_generalist.py --quick               # a first look in minutes
    python experiments/train_generalist.py --finetune=NAME,...   # + fine-tuning vs scratch
    python experiments/train_generalist.py --ship                # + writes the shipped policy
    python experiments/train_generalist.py --agent=mb            # the model-based agent

The seeds' results in one table: experiments/generalist_report.py; the
held-out graphs the agents handed over, timed in onnxruntime:
experiments/measure_generalist.py; one agent's greedy episodes step by
step: experiments/trace_generalist.py (all three take these flags'
--results_dir, --cost_model, --profile and --rules).

Every episode draws a graph from the corpus' training split
(`xflowrl.corpus`, docs/zoo.md "The training distribution"; a family
uniformly, then one of its members) and plays it in that graph's real
environment (`xflowrl.env.sampled.SampledGraphEnv`: the same rules and cost
model for all; step limit at least 1.5 x one-step greedy's steps on the
drawn graph). The policy is the hierarchical PPO agent (X-RLflow's
settings); nothing in it is indexed by node identity or candidate position,
so it acts on any graph. With --agent=mb, the model-based agent instead: its
latent encoder and world model learn from real episodes on the training
graphs, its controller acts on their latent state and learns from 200 of its
own real episodes a round besides a token 64 imagined episodes in all, and
it acts zero-shot on the real environment's masks. Over many graphs the
controller transfers the better the less it learns in the dream
(docs/agents.md, "The model-based agent over the distribution");
`--real_episodes_per_round=0 --dream_episodes=3200` is the thesis'
controller, trained in the dream only.

Evaluation, zero-shot (no training on them): every graph of the held-out
split (whole families never seen, and larger sizes of seen ones), the
policy's greedy episode beside one-step greedy, TASO's search and a random
agent under the same rules and cost model (`xflowrl.generalist.evaluate`).
With --finetune: per named held-out graph, a per-graph agent trained from
scratch for --scratch_episodes against the generalist fine-tuned for each of
--finetune_fractions of that (`xflowrl.generalist.finetune`).

Writes to --results_dir/generalist/<backend>_<profile>/seed<seed>/
(<backend>_<profile>-<rules> with another rule set than the default):
checkpoints and progress.json of the training (rerun with the same flags to
resume), policy/ (the trained policy: `xflowrl.policy.save_policy`,
loadable by `xflowrl optimize --method=policy:DIR`; its policy.json names
the commit and command that trained it, which a resumed finished run
keeps), result.json (`xflowrl.results.generalist.GeneralistRun`) and
result.md; the model-based agent's under mb/seed<seed>/ (its checkpoints,
which resume, in place of policy/). --ship also copies the policy to the
package's shipped folder (`xflowrl/policy/shipped/generalist/`).

The deprecated spelling --cost_model=BACKEND/PROFILE is still accepted,
with a warning (now --cost_model=BACKEND --profile=PROFILE).
"""

import sys

from absl import app, flags, logging
import common
import generalist_flags

from xflowrl import corpus
from xflowrl.entry_points import save_result
from xflowrl.generalist import pipeline

FLAGS = flags.FLAGS
generalist_flags.define_training_flags()
flags.DEFINE_bool("ship", False, "Copy the trained policy to the package's shipped folder.")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv):
    del argv
    config = generalist_flags.config()
    if config.model_based and (FLAGS.ship or config.finetune.graphs):
        raise app.UsageError("--ship and --finetune are for the model-free agent (--agent=mf)")
    logging.info("%d training graphs, %d held-out graphs; results in %s",
                 len(corpus.specs("train")), len(pipeline.held_out_specs(config)),
                 config.seed_dir)
    command = "python experiments/train_generalist.py " + " ".join(sys.argv[1:])
    trained = pipeline.train_generalist(config, command, progress=_say)
    run = pipeline.evaluate_generalist(config, trained, progress=_say)
    text = pipeline.run_markdown(run)
    save_result(config.seed_dir, run.to_json(), markdown=text)
    print(text)
    if FLAGS.ship:
        _say(f"shipped the policy to {pipeline.ship(trained.policy_dir)}")


if __name__ == "__main__":
    app.run(main, argv=common.split_cost_spec(sys.argv))
