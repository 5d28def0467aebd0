"""Checks that the shipped default rule set is what the generator writes.

    .venv/bin/python scripts/check_generated_rules.py

Runs `experiments/generate_rules.py --max_ops=3 --z3_timeout_ms=0` (the
proof tier changes no rule) into a temporary folder and checks that:

1. its rules equal the shipped `xflowrl/rules/files/generated.json` (their
   semantics are checked rule by rule in tests/rules/semantics_test.py);
2. its report counts them (`kept`), with some of two outputs, and finds at
   least 85 of TASO's rules;
3. the check at other sizes dropped, and listed, the rules found on 4x4
   matrices that hold only for a square x0 (among them
   `matmul_relu(concat1(x0, x1), concat0(x0, x2)) -> ...`).

Prints one JSON line and exits non-zero on any failure. The generation takes
about 165 CPU-seconds (both cores busy: over a minute on 2 idle cores,
several under load), so it is not part of `pytest tests` but of `.ci/run`;
the generator's stages are unit-tested on small enumerations in
tests/generator/, and this check's own verdicts in generator_test.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from xflowrl.rules import rules_io  # noqa: E402  pylint: disable=wrong-import-position
from xflowrl.rules.sets import GENERATED_RULES  # noqa: E402  pylint: disable=wrong-import-position

MAX_OPS = 3
MIN_TASO_REDISCOVERED = 85
SQUARE_ONLY_RULE = "matmul_relu(concat1(x0, x1), concat0(x0, x2)) -> "


def failures(rules: list, report: dict, shipped: list) -> list:
    """What differs from the shipped set or its report's facts (empty: none)."""
    out = []
    if rules != shipped:
        out.append(f"the generator wrote {len(rules)} rules, not the {len(shipped)} shipped "
                   f"in {os.path.relpath(GENERATED_RULES, REPO)} (or not the same ones)")
    if report["kept"] != len(shipped):
        out.append(f"report: kept {report['kept']}, shipped {len(shipped)}")
    if report["kept_two_output"] <= 0:
        out.append("report: no rule with two outputs kept")
    if report["taso_rules_rediscovered"] < MIN_TASO_REDISCOVERED:
        out.append(f"report: {report['taso_rules_rediscovered']} of TASO's rules "
                   f"rediscovered, fewer than {MIN_TASO_REDISCOVERED}")
    rejected = report["rejected_other_sizes_rules"]
    if report["rejected_other_sizes"] != len(rejected):
        out.append(f"report: rejected_other_sizes {report['rejected_other_sizes']} but "
                   f"{len(rejected)} listed")
    if not any(line.startswith(SQUARE_ONLY_RULE) for line in rejected):
        out.append(f"report: {SQUARE_ONLY_RULE!r}... (true only for a square x0) was not "
                   "dropped at other sizes")
    return out


def main() -> int:
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="check_generated_rules_") as tmp:
        out, report_path = os.path.join(tmp, "rules.json"), os.path.join(tmp, "report.json")
        run = subprocess.run([sys.executable,
                              os.path.join(REPO, "experiments", "generate_rules.py"),
                              f"--max_ops={MAX_OPS}", "--z3_timeout_ms=0", f"--output={out}",
                              f"--report={report_path}"],
                             cwd=REPO, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            problems = [f"generate_rules.py exited {run.returncode}: {run.stderr[-2000:]}"]
        else:
            with open(report_path) as f:
                report = json.load(f)
            problems = failures(rules_io.load_rules(out), report,
                                rules_io.load_rules(GENERATED_RULES))
    print(json.dumps({"check": "generated_rules", "max_ops": MAX_OPS, "ok": not problems,
                      "problems": problems, "seconds": round(time.time() - start, 1)}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
