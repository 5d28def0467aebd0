"""The rule that picks the shipped generalist: scored on validation graphs
only, ranked by graphs within 2 points of greedy, then mean points, then
the order given."""

import shutil
import tempfile
from unittest import mock

from absl.testing import absltest

from tests.generalist.fixtures import untrained_policy_folders
from xflowrl import corpus, zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.generalist import evaluate, selection
from xflowrl.policy import runtime
from xflowrl.results.generalist import ZeroShotRow
from xflowrl.search import greedy_search, with_equal_step_limit

XFERS = XferSet.default()
COST = CostModel("analytic", profile="v100")
# Two small validation graphs (16 and 19 ops).
GRAPHS = ["transformer/s100", "resnext/b1-2w48g4"]


def _row(graph, initial, greedy, policy):
    return ZeroShotRow(graph, 10, initial, policy, greedy, None, None, 0.0, 0.0, None, 5)


def _candidate(folder, within, mean):
    return selection.CandidateScore(folder, 0, "", "", [], within, mean)


class ScoreTest(absltest.TestCase):

    def test_points_are_the_policy_against_greedy_in_points_of_the_initial_cost(self):
        score = selection.graph_score(_row("g", 2.0, 1.5, 1.56))
        self.assertAlmostEqual(score.points_vs_greedy, 3.0)
        self.assertAlmostEqual(selection.graph_score(_row("g", 2.0, 1.5, 1.4)).points_vs_greedy,
                               -5.0)

    def test_within_margin_counts_graphs_at_most_two_points_behind_greedy(self):
        rows = [_row("a", 1.0, 0.8, 0.82),    # 2 points behind: within
                _row("b", 1.0, 0.8, 0.8201),  # 2.01 behind: not
                _row("c", 1.0, 0.8, 0.7)]     # 10 points ahead
        score = selection.candidate_score("dir", rows, seed=3)
        self.assertEqual(score.within_margin, 2)
        self.assertAlmostEqual(score.mean_points, (2.0 + 2.01 - 10.0) / 3)
        self.assertEqual([g.graph for g in score.graphs], ["a", "b", "c"])
        self.assertEqual(score.seed, 3)
        with self.assertRaisesRegex(ValueError, "no validation graphs"):
            selection.candidate_score("dir", [])


class RankTest(absltest.TestCase):

    def test_most_graphs_within_the_margin_first(self):
        cands = [_candidate("a", 20, -1.0), _candidate("b", 22, 3.0), _candidate("c", 21, -9.0)]
        ranked = selection.rank(cands)
        self.assertEqual([c.folder for c in ranked], ["b", "c", "a"])
        self.assertEqual([c.rank for c in cands], [3, 1, 2])

    def test_ties_go_to_the_lower_mean_then_to_the_first_given(self):
        cands = [_candidate("a", 22, 0.5), _candidate("b", 22, -0.5), _candidate("c", 22, -0.5)]
        self.assertEqual([c.folder for c in selection.rank(cands)], ["b", "c", "a"])


class ValidationGraphsTest(absltest.TestCase):

    def test_the_default_is_the_whole_validation_split(self):
        self.assertEqual(list(selection.validation_graphs()),
                         corpus.CORPUS.names("validation"))

    def test_held_out_zoo_and_training_graphs_are_refused(self):
        for name in (corpus.specs("held_out")[0].name, corpus.specs("train")[0].name, "bert",
                     "vit/l1h64p16"):
            with self.assertRaisesRegex(ValueError, "not in the validation split"):
                selection.validation_graphs([GRAPHS[0], name])
        with self.assertRaisesRegex(ValueError, "no validation graphs named"):
            selection.validation_graphs([])


class SelectTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        # Untrained networks: two different policies.
        cls.folders = untrained_policy_folders(cls.root, GRAPHS[0], (1, 2), XFERS, COST)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, True)
        super().tearDownClass()

    def test_each_candidate_is_scored_as_its_policy_acts_and_the_best_wins(self):
        played = []
        compare = evaluate.compare

        def spy(agents, graphs, *args, **kwargs):
            played.extend(graphs)
            return compare(agents, graphs, *args, **kwargs)

        with mock.patch.object(evaluate, "compare", spy):
            decision = selection.select(self.folders, XFERS, COST, graphs=GRAPHS)
        # Only validation graphs were played: no held-out, training or zoo graph.
        self.assertEqual(played, GRAPHS)
        self.assertTrue(set(played) <= set(corpus.CORPUS.names("validation")))
        self.assertFalse(set(played) & (set(corpus.CORPUS.names("held_out"))
                                        | set(corpus.CORPUS.names("train")) | set(zoo.GRAPHS)))
        self.assertEqual(decision.graphs, GRAPHS)
        self.assertEqual([c.folder for c in decision.candidates], self.folders)
        for cand in decision.candidates:
            policy = runtime.NumpyPolicy.load(cand.folder)
            for score, name in zip(cand.graphs, GRAPHS):
                env = with_equal_step_limit(GraphEnv(corpus.get(name), XFERS, COST,
                                                     EnvConfig()))
                policy.run_episode(env)
                self.assertAlmostEqual(score.policy_ms, env.cheapest_prefix.cost, places=9)
                self.assertAlmostEqual(score.greedy_ms, greedy_search(env).final_cost,
                                       places=9)
        best = selection.rank(list(decision.candidates))[0]
        self.assertEqual(decision.winner, best.folder)
        self.assertEqual(best.rank, 1)
        text = selection.markdown(decision)
        self.assertIn(f"Ships: {decision.winner}", text)
        self.assertIn(f"| {GRAPHS[1]} |", text)

    def test_a_graph_outside_the_validation_split_is_refused(self):
        with self.assertRaisesRegex(ValueError, "not in the validation split"):
            selection.select(self.folders, XFERS, COST, graphs=["small_cnn"])

    def test_a_folder_without_a_policy_is_refused(self):
        with self.assertRaisesRegex(ValueError, "is not a policy folder"):
            selection.select([self.folders[0], self.root], XFERS, COST, graphs=GRAPHS)


if __name__ == "__main__":
    absltest.main()
