"""xflowrl.measure.profile_fit: the profile method's variants, hold-out,
refit and the fitted profile's content (no profiling: rows made here)."""

from absl.testing import absltest
import numpy as np

from xflowrl.engine import XferSet
from xflowrl.measure import cost_fit, profile_fit
from xflowrl.measure.profile_fit import ProfileFitConfig, Profiled
from xflowrl.rules.sets import DEFAULT_RULE_SET


def _rows():
    """Conv kernels of 1 + 2 ms per GFLOP, in two graphs."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(12):
        gflop = float(rng.uniform(0.1, 2.0))
        graph = "a/original" if i % 2 else "b/greedy[analytic/cpu]"
        out.append(cost_fit.Row(graph, i, "conv", gflop * 1e9, float(rng.uniform(1e4, 1e6)),
                                1.0 + 2.0 * gflop))
    return out


# e2e = 1.5 x the kernels' time: the overhead scale is 1.5, no per-kernel cost.
GRAPHS = [{"graph": "a", "variant": "original", "kernels": 6, "kernel_ms": 10.0,
           "e2e_ms": 15.0},
          {"graph": "b", "variant": "greedy[analytic/cpu]", "kernels": 6, "kernel_ms": 20.0,
           "e2e_ms": 30.0}]


class ProfileFitTest(absltest.TestCase):

    def test_fitted_profile_folds_the_overhead_into_the_fit(self):
        profiled = Profiled(_rows(), GRAPHS, "cmd")
        out = profile_fit.fitted_profile(profiled, "some CPU")
        self.assertEqual(out["method"], "profile")
        self.assertEqual((out["command"], out["machine"]), ("cmd", "some CPU"))
        self.assertAlmostEqual(out["overhead_scale"], 1.5, places=6)
        self.assertAlmostEqual(out["per_kernel_overhead_ms"], 0.0, places=6)
        conv = out["coefficients"]["conv"]
        self.assertAlmostEqual(conv[0], 1.5 * 1.0, places=3)   # c0 x scale
        self.assertAlmostEqual(conv[1], 1.5 * 2.0, places=3)   # per GFLOP x scale
        self.assertAlmostEqual(conv[2], 0.0, places=3)         # bytes: no part
        self.assertEqual(out["fit"]["conv"]["rows"], 12)
        self.assertEqual(out["fit"]["pool"], {"rows": 0})
        # The rows are stored, so a refit reads them back.
        self.assertEqual(cost_fit.read_rows(out), _rows())
        self.assertEqual(set(profile_fit.SUMMARY_KEYS) - set(out), set())
        # A row of an older profile (no "guid") is refused, naming the file.
        older = dict(out, rows=[{k: v for k, v in r.items() if k != "guid"}
                                for r in out["rows"]])
        with self.assertRaisesRegex(ValueError, r"^fitted.json: row 0 has the fields "
                                    r"\['bytes', 'flops', 'graph', 'ms', 'op_class'\], not .* "
                                    r"\(an older profile\); fit it again$"):
            cost_fit.read_rows(older, "fitted.json")

    def test_refit_reads_the_stored_rows(self):
        stored = profile_fit.fitted_profile(Profiled(_rows(), GRAPHS, "cmd"), "cpu")
        again = profile_fit.refit_source(stored, "old.json")
        self.assertEqual(again.rows, _rows())
        self.assertEqual(again.graphs, GRAPHS)
        self.assertEqual(again.command, "cmd (refit: --refit_from=old.json)")
        self.assertEqual(profile_fit.fitted_profile(again, "cpu")["coefficients"],
                         stored["coefficients"])
        with self.assertRaisesRegex(ValueError, "old.json stores no profiled rows"):
            profile_fit.refit_source({"coefficients": {}}, "old.json")

    def test_held_out_graphs_leave_rows_and_times(self):
        profiled = Profiled(_rows(), GRAPHS, "cmd")
        self.assertIs(profile_fit.held_out(profiled, []), profiled)
        kept = profile_fit.held_out(profiled, ["b"])
        self.assertLen(kept.rows, 6)
        self.assertTrue(all(r.graph.startswith("a/") for r in kept.rows))
        self.assertEqual([g["graph"] for g in kept.graphs], ["a"])
        self.assertEqual(kept.command, "cmd --hold_out=b")

    def test_command_names_the_settings(self):
        config = ProfileFitConfig(graphs=("bert", "vit"), optimize_with=("analytic/cpu",),
                                  taso_graphs=("bert",), runs=5, passes=1, seed=3)
        self.assertEqual(config.command(), "python experiments/fit_cost_model.py "
                         "--method=profile --graphs=bert,vit --optimize_with=analytic/cpu "
                         "--taso_graphs=bert --runs=5 --passes=1 --seed=3")

    def test_variants_are_distinct_graphs_with_one_set_of_weights(self):
        config = ProfileFitConfig(graphs=("small_cnn",), optimize_with=("analytic/cpu",),
                                  taso_graphs=("small_cnn",), taso_budget=5)
        out = profile_fit.variants("small_cnn", XferSet.from_name(DEFAULT_RULE_SET), config)
        self.assertEqual(next(iter(out)), "small_cnn/original")
        self.assertTrue(set(out) <= {"small_cnn/original", "small_cnn/greedy[analytic/cpu]",
                                     "small_cnn/taso[analytic/cpu]"})
        hashes = [graph.hash() for graph, _, _ in out.values()]
        self.assertEqual(len(hashes), len(set(hashes)))
        weights = [w for _, w, _ in out.values()]
        self.assertTrue(all(w is weights[0] for w in weights))
        # Without TASO on the graph, no TASO variant.
        no_taso = profile_fit.variants("small_cnn", XferSet.from_name(DEFAULT_RULE_SET),
                                       ProfileFitConfig(("small_cnn",), ("analytic/cpu",), ()))
        self.assertNotIn("small_cnn/taso[analytic/cpu]", no_taso)


if __name__ == "__main__":
    absltest.main()
