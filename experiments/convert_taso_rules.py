"""Converts TASO's binary rule collection into the project's JSON rule format.

    python experiments/convert_taso_rules.py \
        --input=../shared/data/taso_graph_subst.pb \
        --output=third_party/taso/rules/taso_rules.json
"""

from absl import app
from absl import flags

from xflowrl.graphs import rules_io

FLAGS = flags.FLAGS
flags.DEFINE_string("input", "../shared/data/taso_graph_subst.pb", "TASO's graph_subst.pb.")
flags.DEFINE_string("output", "third_party/taso/rules/taso_rules.json", "JSON rule file.")


def main(argv):
    del argv
    rules, skipped = rules_io.read_taso_rules(FLAGS.input)
    rules_io.save_rules(rules, FLAGS.output)
    print(f"{len(rules)} rules written to {FLAGS.output}; {len(skipped)} skipped")
    for message in skipped:
        print(f"  skipped {message}")


if __name__ == "__main__":
    app.run(main)
