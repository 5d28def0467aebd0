"""Converts TASO's binary rule collection into the project's JSON rule format.

Writes `xflowrl/rules/files/taso_rules.json` from TASO's `graph_subst.pb`
(docs/rules.md) and lists the rules it cannot express, with the reason:

    python experiments/convert_taso_rules.py \
        --input=PATH/TO/TASO/graph_subst.pb \
        --output=xflowrl/rules/files/taso_rules.json
"""

import os

from absl import app, flags

from xflowrl.rules import rules_io, taso_pb

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_INPUT = flags.DEFINE_string(
    "input", os.environ.get("XFLOWRL_TASO_PB"),
    "TASO's graph_subst.pb (at the root of github.com/jiazhihao/TASO); default: "
    "$XFLOWRL_TASO_PB.")
_OUTPUT = flags.DEFINE_string(
    "output", os.path.join(_REPO, "xflowrl", "rules", "files", "taso_rules.json"),
    "The JSON rule file to write.")
_ALLOW_SKIPPED = flags.DEFINE_bool(
    "allow_skipped", True, "Write the file even if some rules cannot be expressed.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    if not _INPUT.value:
        raise app.UsageError("--input: the path of TASO's graph_subst.pb (or set XFLOWRL_TASO_PB)")
    rules, skipped = taso_pb.read_taso_rules(_INPUT.value)
    for message in skipped:
        print(f"skipped {message}")
    if skipped and not _ALLOW_SKIPPED.value:
        raise app.UsageError(f"{len(skipped)} rules cannot be expressed; nothing written")
    rules_io.save_rules(rules, _OUTPUT.value)
    print(f"{len(rules)} rules written to {_OUTPUT.value}; {len(skipped)} skipped")


if __name__ == "__main__":
    app.run(main)
