"""Chooses which trained generalist ships, by the rule fixed in
`xflowrl.generalist.selection`, on the corpus' validation split only.

    python experiments/select_generalist.py --seeds=0,1,2,3,4          # the decision
    python experiments/select_generalist.py --seeds=0,1,2,3,4 --ship   # + ship the winner
    python experiments/select_generalist.py --policy=DIR1,DIR2,...     # any policy folders

The candidates are the policy folders that experiments/train_generalist.py
wrote for --seeds under the setting's results folder (--results_dir,
--cost_model, --profile, --rules, as train_generalist.py's:
<folder>/seed<S>/policy), or the folders of --policy. Each plays its
zero-shot episode on every validation graph (or those of --graphs, which
must be validation graphs) beside one-step greedy; the
rule: most graphs within 2 points of greedy, ties by the lowest mean points
against greedy, then the first candidate given (docs/agents.md, "Which
generalist ships"). The held-out graphs and the zoo's are never played.

Writes the decision (each candidate's per-graph and summary scores, its
rank, the winner) to --out (default <folder>/selection.json, and the tables
as selection.md beside it). --ship copies the winner to the package's
shipped folder (`xflowrl/policy/shipped/generalist/`).
"""

import os
import sys

from absl import app, flags
import common
import generalist_flags

from xflowrl.engine import XferSet
from xflowrl.entry_points import cost_model_from_spec, write_json, write_text
from xflowrl.generalist import pipeline, selection

FLAGS = flags.FLAGS
generalist_flags.define_folder_flags()
flags.DEFINE_list("seeds", ["0", "1", "2", "3", "4"], "The trained seeds whose policies are "
                  "the candidates (<folder>/seed<S>/policy).")
flags.DEFINE_list("policy", [], "Candidate policy folders instead of --seeds'.")
flags.DEFINE_list("graphs", [], "Validation graphs to score on (default: the whole "
                  "validation split; any other graph is refused).")
flags.DEFINE_string("out", "", "JSON to write (default <folder>/selection.json).")
flags.DEFINE_bool("ship", False, "Copy the winner to the package's shipped folder.")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv):
    del argv
    folder = generalist_flags.folder()
    candidates = FLAGS.policy or [os.path.join(folder, f"seed{int(s)}", "policy")
                                  for s in FLAGS.seeds]
    try:
        decision = selection.select(candidates, XferSet.from_name(FLAGS.rules),
                                    cost_model_from_spec(f"{FLAGS.cost_model}/{FLAGS.profile}"),
                                    graphs=FLAGS.graphs or None, progress=_say)
    except ValueError as e:
        sys.exit(str(e))
    text = selection.markdown(decision)
    path = FLAGS.out or os.path.join(folder, "selection.json")
    write_json(path, decision.to_json())
    write_text(os.path.splitext(path)[0] + ".md", text + "\n")
    print(text)
    _say(f"wrote {path}")
    if FLAGS.ship:
        _say(f"shipped {decision.winner} to {pipeline.ship(decision.winner)}")


if __name__ == "__main__":
    app.run(main, argv=common.split_cost_spec(sys.argv))
