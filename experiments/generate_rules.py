"""Generates and verifies substitution rules the TASO way (thesis §3.1).

    python experiments/generate_rules.py --max_ops=3 \
        --output=xflowrl/rules/files/generated.json

Enumerates every graph of up to --max_ops ops over the operator templates of
xflowrl/generator/enumeration.py, fingerprints outputs exactly (mod a prime),
pairs equal fingerprints, verifies each pair numerically, prunes (non-normal
forms, renamings, common subgraphs, instances, duplicates), writes the kept
rules (project JSON format), tries to prove each from operator axioms with z3
(second tier) and writes a JSON report (also printed), including how many of
TASO's 133 shipped rules the generated set contains up to renaming.

Only the proof tier needs z3: with --z3_timeout_ms=0 the script runs without
z3 installed (the check at other sizes solves its size constraints itself,
xflowrl/generator/sizes.py).
"""

import dataclasses
import json
import os
import sys

from absl import app, flags

from xflowrl.engine.xfers import XferSet
from xflowrl.generator import emit, generate
from xflowrl.rules import rules_io, taso_pb
from xflowrl.rules.sets import TASO_RULES_JSON

FLAGS = flags.FLAGS
flags.DEFINE_integer("max_ops", 3, "K: ops per enumerated graph (3: 1-2 min on 2 cores "
                     "with the z3 tier, the shipped default set; 4: the 3-input matrix "
                     "family alone took 23 min and 7 GB on one worker, docs/generator.md).")
flags.DEFINE_list("families", ["matrix", "conv"], "Operator families to enumerate.")
flags.DEFINE_integer("seed", 0, "Seed of fingerprint and verification inputs.")
flags.DEFINE_integer("workers", 0, "Processes verifying candidates (0: one per CPU).")
flags.DEFINE_enum("pairing", "representative", ["representative", "all"],
                  "Pair each class member with its representative (TASO) or all pairs.")
flags.DEFINE_string("output", "results/generator/generated.json", "Rule file written.")
flags.DEFINE_string("taso_pb", os.environ.get("XFLOWRL_TASO_PB", ""),
    "TASO's rule collection to compare with (graph_subst.pb, at the root of "
    "github.com/jiazhihao/TASO; all 133 rules; default $XFLOWRL_TASO_PB); falls back "
    "to xflowrl/rules/files/taso_rules.json if absent.")
flags.DEFINE_string("report", "results/generator/report.json", "Report written.")
flags.DEFINE_bool("check_other_sizes", True, "Evaluate every kept rule at other sizes "
                  "(other_sizes.counterexample) and drop those that differ there.")
flags.DEFINE_integer("z3_timeout_ms", 1000, "Per-rule time limit of the z3 proof tier "
                     "(xflowrl/generator/symbolic.py); 0 skips it.")


def main(argv):
    del argv
    rules, report = generate(FLAGS.max_ops, FLAGS.families, seed=FLAGS.seed,
                             workers=FLAGS.workers, pairing=FLAGS.pairing,
                             check_other_sizes=FLAGS.check_other_sizes,
                             progress=lambda line: print(line, file=sys.stderr, flush=True))
    XferSet(rules)  # every emitted rule loads into the engine
    if os.path.exists(FLAGS.taso_pb):
        taso, _ = taso_pb.read_taso_rules(FLAGS.taso_pb, drop_unsound=False)
    else:
        taso = rules_io.load_rules(TASO_RULES_JSON)
    report.taso_rules = len(taso)
    report.taso_rules_rediscovered = emit.count_contained(rules, taso)
    for path in (FLAGS.output, FLAGS.report):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    rules_io.save_rules(rules, FLAGS.output)
    summary = dataclasses.asdict(report)
    _write(summary)
    if FLAGS.z3_timeout_ms > 0:
        from xflowrl.generator import symbolic  # z3 is only needed here
        proofs = symbolic.prove_all(
            rules, FLAGS.z3_timeout_ms,
            progress=lambda line: print(line, file=sys.stderr, flush=True))
        summary.update({f"z3_{k.replace(' ', '_')}": v for k, v in proofs.counts.items()})
        summary.update(z3_axioms=proofs.axioms, z3_timeout_ms=FLAGS.z3_timeout_ms,
                       z3_seconds=proofs.seconds)
        _write(dict(summary, z3_answers=proofs.statuses))
    print(json.dumps(summary, indent=2))


def _write(summary: dict) -> None:
    with open(FLAGS.report, "w") as f:
        json.dump(summary, f, indent=2)


if __name__ == "__main__":
    app.run(main)
