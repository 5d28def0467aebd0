"""xflowrl.results.sweep: the temperature sweep's rows over its seeds and
its result.md (the records' round trips are in records_test.py)."""

from absl.testing import absltest

from xflowrl.results import SweepCell, SweepResult, SweepRow, SweepSeed, sweep_rows


def _seed(seed, scores):
    """A seed's cells: per temperature (world-model score, real score)."""
    return SweepSeed(seed=seed, initial_cost_ms=10.0, seconds=1.0, cells=[
        SweepCell(temperature=t, world_model=w, real=r, applied=[["fuse", seed]],
                  invalid_actions=0) for t, (w, r) in scores.items()])


class SweepRowsTest(absltest.TestCase):

    def test_mean_and_std_over_the_seeds_in_the_sweeps_temperature_order(self):
        seeds = [_seed(0, {1.0: (-1.0, -2.0), 0.5: (-3.0, 1.0)}),
                 _seed(1, {0.5: (-1.0, 3.0), 1.0: (-1.0, -4.0)})]
        rows = sweep_rows([0.5, 1.0], seeds)
        self.assertEqual([r.temperature for r in rows], [0.5, 1.0])
        self.assertEqual(rows[0], SweepRow(
            temperature=0.5, world_model_mean=-2.0, world_model_std=1.0, real_mean=2.0,
            real_std=1.0, world_model=[-3.0, -1.0], real=[1.0, 3.0],
            applied=[[["fuse", 0]], [["fuse", 1]]]))
        self.assertEqual((rows[1].world_model_std, rows[1].real_mean), (0.0, -3.0))

    def test_a_cell_of_another_temperature_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"seed 3: a cell at temperature 2.0, not one "
                                    r"of the sweep's \[0.5, 1.0\]"):
            sweep_rows([0.5, 1.0], [_seed(3, {2.0: (0.0, 0.0)})])


class SweepMarkdownTest(absltest.TestCase):

    def test_table_4_3(self):
        rows = sweep_rows([0.5, 1.0], [_seed(0, {0.5: (-1.0, -2.0), 1.0: (0.5, 1.25)})])
        result = SweepResult(graph="bert", cost_model="analytic/v100", seeds=1,
                             dream_episodes=64, rules="default", max_locations=50,
                             initial_cost_ms=10.0, seconds=12.4, rows=rows,
                             world_model={"hidden": 8})
        self.assertEqual(result.markdown(),
                         "# Temperature sweep on bert (Table 4.3)\n\n1 seeds, 64 imagined "
                         "episodes per controller, 12 s.\n\n| temperature | world-model score "
                         "| real score |\n|---|---|---|\n"
                         "| 0.5 | -1.000% ± 0.000% | -2.000% ± 0.000% |\n"
                         "| 1.0 | +0.500% ± 0.000% | +1.250% ± 0.000% |\n")


if __name__ == "__main__":
    absltest.main()
