"""The numeric generator runs without z3: only the proof tier needs it."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from xflowrl.generator import generate
from xflowrl.rules import rules_io

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs experiments/generate_rules.py with z3 unimportable (a None entry in
# sys.modules makes `import z3` raise ImportError), looks for the witness of
# a rule that holds only for square matrices, and records whether anything
# imported z3 after all.
_WITHOUT_Z3 = """
import runpy, sys
sys.modules["z3"] = None
sys.argv = ["generate_rules.py"] + sys.argv[1:]
try:
    runpy.run_path("experiments/generate_rules.py", run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
from xflowrl.generator import other_sizes
from tests.generator.sizes_test import _square_only
print("WITNESS", other_sizes.counterexample(_square_only()))
print("Z3_IMPORTED" if sys.modules.get("z3") is not None else "Z3_ABSENT")
"""


class WithoutZ3Test(absltest.TestCase):

    def test_generate_rules_runs_without_z3_and_finds_the_same_rules(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, report = os.path.join(tmp, "rules.json"), os.path.join(tmp, "report.json")
            proc = subprocess.run(
                [sys.executable, "-c", _WITHOUT_Z3, "--max_ops=2", "--families=matrix",
                 "--workers=2", "--z3_timeout_ms=0", f"--output={out}", f"--report={report}"],
                cwd=REPO, capture_output=True, text=True,
                env=dict(os.environ, PYTHONPATH=REPO))
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            self.assertIn("Z3_ABSENT", proc.stdout)
            self.assertRegex(proc.stdout, r"WITNESS v1\[.*differ by")
            rules = rules_io.load_rules(out)
            with open(report) as f:
                summary = json.load(f)
        self.assertNotEmpty(rules)
        # The check at other sizes ran (it rejects nothing at this setting)
        # ...
        self.assertGreater(summary["seconds_other_sizes"], 0.0)
        # ... and the rules are those found in this process, where z3 may be
        # installed (the shipped K=3 set is checked in generator_test.py).
        expected, _ = generate(2, ["matrix"], workers=1)
        self.assertEqual(rules, expected)


if __name__ == "__main__":
    absltest.main()
