"""benchmarks/descent_tail_bench.py as a user runs it (a subprocess): on
Inception-v3 under TASO's rules and the learned H100 model, one-step
greedy's improving relu merges all lie past L, and the tail takes them."""

from absl.testing import absltest

from tests import entry_point


class DescentTailBenchTest(absltest.TestCase):

    def test_what_l_hides_and_what_the_tail_takes(self):
        report = entry_point.run_report(
            "benchmarks/descent_tail_bench.py",
            ["--graphs=inception_v3,squeezenet1_1", "--rules=taso", "--cost_models=learned/h100"])
        rows = {r["setting"]: r for r in report["rows"]}
        inception = rows["inception_v3/taso/learned/h100"]
        self.assertEqual(inception["tail_xfers"], ["taso_95"])
        self.assertGreater(inception["tail_steps"], 0)
        self.assertLess(inception["tail_change_pct"], inception["walk_change_pct"])
        hidden = {h["xfer"]: h for h in inception["hidden_improving"]}
        self.assertEqual(hidden["taso_95"]["improving_within_l"], 0)
        self.assertGreater(hidden["taso_95"]["improving"], 0)
        self.assertGreater(hidden["taso_95"]["locations"], 200)
        squeezenet = rows["squeezenet1_1/taso/learned/h100"]
        self.assertEqual((squeezenet["tail_steps"], squeezenet["hidden_improving"]), (0, []))
        self.assertEqual(squeezenet["tail_change_pct"], squeezenet["walk_change_pct"])
        summary = report["summary"]["learned/h100"]
        self.assertEqual(summary["settings"], 2)
        self.assertEqual(summary["went_on"], ["inception_v3/taso/learned/h100"])


if __name__ == "__main__":
    absltest.main()
