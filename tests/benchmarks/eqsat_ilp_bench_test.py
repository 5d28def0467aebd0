"""benchmarks/eqsat_ilp_bench.py as a user runs it (a subprocess): each
acyclic program's size, its linear relaxation below its start and below
what HiGHS proves, a variant of HiGHS options beside the defaults, and a
refused variant."""

import json
import os
import sys

from absl.testing import absltest

from tests import entry_point

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BENCH = os.path.join(_ROOT, "benchmarks", "eqsat_ilp_bench.py")


class EqsatIlpBenchTest(absltest.TestCase):

    def test_programs_relaxations_and_variants(self):
        done = entry_point.run(
            [sys.executable, _BENCH, "--settings=squeezenet1_1/tensat", "--cpu_limit=5",
             "--variant=mip_heuristic_effort=0,mip_allow_restart=false"],
            capture_output=True, text=True, timeout=600, cwd=_ROOT)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        report = json.loads(done.stdout)
        self.assertEqual(report["variants"]["mip_heuristic_effort=0,mip_allow_restart=false"],
                         {"mip_heuristic_effort": 0, "mip_allow_restart": False})
        setting = report["settings"]["squeezenet1_1/tensat"]
        self.assertEqual(set(setting["programs"]), {"walk", "age"})
        for name, program in setting["programs"].items():
            start, relaxation = program["start_objective"], program["relaxation"]
            self.assertGreater(program["rows"], 0, name)
            self.assertGreater(program["e_nodes"], 0, name)
            # The relaxation is a lower bound of every solution, the start's
            # included, and of what HiGHS proves.
            self.assertLessEqual(relaxation, start * (1 + 1e-9), name)
            self.assertAlmostEqual(program["relaxation_gap"], (start - relaxation) / start)
            for variant, solves in program["solves"].items():
                self.assertLen(solves, 1)
                solve = solves[0]
                self.assertEqual(solve["status"], "optimal", (name, variant))
                self.assertLessEqual(solve["objective"], start * (1 + 1e-9), (name, variant))
                self.assertLessEqual(relaxation, solve["bound"] * (1 + 1e-6), (name, variant))
                self.assertAlmostEqual(solve["bound"], solve["objective"],
                                       delta=2e-4 * solve["objective"])
            optima = {round(s[0]["objective"], 6) for s in program["solves"].values()}
            self.assertLen(optima, 1, name)  # the same optimum under both variants
            # The relaxation is solved as one (continuous variables): here it
            # lies far below the optimum, which the MIP would have reached.
            self.assertLess(relaxation, 0.9 * optima.pop(), name)

    def test_a_variant_highs_rejects_is_refused(self):
        done = entry_point.run(
            [sys.executable, _BENCH, "--settings=squeezenet1_1/tensat",
             "--variant=mip_heuristic_effort=much"],
            capture_output=True, text=True, timeout=300, cwd=_ROOT)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("HiGHS rejects option mip_heuristic_effort='much'", done.stderr)


if __name__ == "__main__":
    absltest.main()
