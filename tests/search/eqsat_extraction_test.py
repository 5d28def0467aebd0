"""Tests of the ILP's shortcuts and limits (xflowrl.search.eqsat.extract): a
start is taken without solving only where it provably costs the least (the
same cost as solving), the lower bound never exceeds what HiGHS finds, and
HiGHS stops on its CPU-time limit with its best solution so far; a
program already proven optimal is not solved again."""

import itertools
from typing import List
from unittest import mock

from absl.testing import absltest

from tests.search.egraph_fixtures import costed, grown, self_reading_class, shared_sub_graph
from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.search.eqsat import (
    EGraph,
    EqsatConfig,
    build_graph,
    equality_saturation,
    extract,
    greedy_extract,
    ilp_extract,
)
from xflowrl.search.eqsat.extract import _Program, dag_cost, tree_costs, used
from xflowrl.search.eqsat.rewrites import canonical
from xflowrl.search.eqsat.saturation import filter_for_program

_COST = cost_model_from_spec("analytic/v100")


def _cheap_head():
    """y = relu(x) (1 ms), also sigmoid(tanh(x)) (1 ms + 2 ms), read by a
    free sigmoid at the output: the second
    e-node of y is as cheap as the first but reads a class that costs more.
    The start, relu(x), costs 1 ms, and so does the bound: x is required
    whichever e-node y takes, tanh(x)'s class is not."""
    eg = EGraph()
    x = eg.add("input", (("name", "x"), ("shape", (2, 2))), ())
    y = eg.add("relu", canonical("relu", {}), [x])
    t = eg.add("tanh", canonical("tanh", {}), [x])
    eg.union(y, eg.add("sigmoid", canonical("sigmoid", {}), [t]))
    root = eg.add("sigmoid", canonical("sigmoid", {}), [y])
    eg.rebuild()
    costs = costed(eg, {("relu", x): 1.0, ("tanh", x): 2.0, ("sigmoid", eg.find(t)): 1.0})
    return eg, [root], costs


class ProvenStartTest(absltest.TestCase):

    def test_a_start_as_cheap_as_the_bound_is_taken_without_solving(self):
        eg, roots, costs = _cheap_head()
        start = greedy_extract(eg, roots, costs).choice
        self.assertAlmostEqual(dag_cost(eg, start, roots, costs), 1.0)
        skipped = ilp_extract(eg, roots, costs, 10, start=start)
        solved = ilp_extract(eg, roots, costs, 10, start=start, skip_proven=False)
        self.assertEqual(skipped.status, "skipped")
        self.assertEqual(solved.status, "optimal")
        self.assertAlmostEqual(skipped.dag_cost, solved.dag_cost)
        self.assertAlmostEqual(skipped.bound, 1.0)
        graph = build_graph(eg, skipped.choice, roots)
        self.assertEqual(graph.op_counts(), {"relu": 1, "sigmoid": 1})

    def test_a_start_above_the_optimum_is_solved(self):
        eg, roots, costs = shared_sub_graph()
        start = greedy_extract(eg, roots, costs).choice
        self.assertAlmostEqual(dag_cost(eg, start, roots, costs), 10.0)
        program = _Program(eg, roots, costs, start)
        self.assertFalse(program.cheapest_everywhere(used(eg, start, roots)))
        self.assertLessEqual(program.lower_bound(), 8.0)
        ilp = ilp_extract(eg, roots, costs, 10, start=start)
        self.assertEqual(ilp.status, "optimal")
        self.assertAlmostEqual(ilp.dag_cost, 8.0)

    def test_no_bound_over_a_cycle(self):
        # x = split(concat(x, y))[0]: the class graph has a cycle, and the
        # bound's induction needs none.
        eg, root, _, _ = self_reading_class()
        costs = {n: 1.0 for c in eg.classes() for n in eg.live_nodes(c)}
        self.assertIsNone(_Program(eg, [root], costs).lower_bound())

    def test_on_grown_e_graphs_skipping_changes_no_cost(self):
        # Both acyclic programs of equality saturation (the walk's, the age
        # order's) on e-graphs grown from zoo graphs: the bound is never
        # above the optimum HiGHS proves, and taking a proven start costs
        # what solving costs. resnet18 under TASO's rules improves nothing,
        # so its walk's program is skipped; squeezenet1_1 improves.
        skipped: List[str] = []
        for name, rules in (("resnet18", "taso"), ("squeezenet1_1", "tensat")):
            eg, roots, costs, start = grown(name, rules, 3, _COST)
            order = tree_costs(eg, roots, costs)
            for program in ("walk", "age"):
                filter_for_program(eg, program, roots, order, start)
                bound = _Program(eg, roots, costs, start).lower_bound()
                solved = ilp_extract(eg, roots, costs, 60, start=start, skip_proven=False)
                quick = ilp_extract(eg, roots, costs, 60, start=start)
                self.assertEqual(solved.status, "optimal", (name, program))
                if bound is not None:
                    self.assertLessEqual(bound, solved.dag_cost + 1e-9, (name, program))
                self.assertAlmostEqual(quick.dag_cost, solved.dag_cost, places=9,
                                       msg=(name, program))
                if quick.status == "skipped":
                    skipped.append(f"{name}/{program}")
                    self.assertAlmostEqual(quick.dag_cost, dag_cost(eg, start, roots, costs),
                                           places=12)
                else:
                    self.assertEqual(quick.status, "optimal")
        self.assertIn("resnet18/walk", skipped)

    def test_the_result_says_which_programs_were_skipped(self):
        graph = zoo.get_graph("resnet18")
        result = equality_saturation(graph, XferSet.from_name("taso"), _COST,
                                     EqsatConfig(check_outputs=False))
        statuses = result.ilp_status.split("+")
        self.assertLen(statuses, result.ilp_programs)
        self.assertEqual(statuses[0], "skipped")
        self.assertAlmostEqual(result.ilp_cost, result.greedy_cost, places=12)
        self.assertEqual(result.ilp_gap_percent, 0.0)


class RepeatedProgramTest(absltest.TestCase):
    """A program proven optimal is not solved again where the next one is
    the same program (`ilp_extract(repeat_of=...)`)."""

    def test_the_same_program_is_answered_without_solving(self):
        eg, roots, costs = shared_sub_graph()
        start = greedy_extract(eg, roots, costs).choice
        first = ilp_extract(eg, roots, costs, 10, start=start)
        self.assertEqual(first.status, "optimal")
        self.assertEqual(first.program, _Program(eg, roots, costs, start).identity)
        with mock.patch.object(extract, "_solve", wraps=extract._solve) as spy:
            again = ilp_extract(eg, roots, costs, 10, start=first.choice, repeat_of=first)
        spy.assert_not_called()
        self.assertEqual(again.status, "same")
        self.assertEqual(again.choice, first.choice)
        self.assertEqual(again.dag_cost, first.dag_cost)
        self.assertEqual(again.program, first.program)

    def test_an_unproven_or_other_program_is_solved(self):
        eg, roots, costs = shared_sub_graph()
        start = greedy_extract(eg, roots, costs).choice
        first = ilp_extract(eg, roots, costs, 10, start=start)
        for earlier in (first._replace(status="cpu_limit"),
                        first._replace(program=first.program[:1] + ((),))):
            with mock.patch.object(extract, "_solve", wraps=extract._solve) as spy:
                again = ilp_extract(eg, roots, costs, 10, start=start, repeat_of=earlier)
            spy.assert_called()
            self.assertEqual(again.status, "optimal")
            self.assertAlmostEqual(again.dag_cost, first.dag_cost, places=12)

    def test_a_run_whose_age_filter_leaves_the_walk_s_program_hands_over_the_same(self):
        # nasnet_a under TASO's rules: the age order's filter leaves the
        # walk's e-nodes, so the second program is the first, answered
        # without solving. Solving it again, as before the shortcut, ends
        # at the same cost.
        graph = zoo.get_graph("nasnet_a")
        rules = XferSet.from_name("taso")
        config = EqsatConfig(check_outputs=False)
        ilp_extract_itself = extract.ilp_extract

        def solving_again(*args, repeat_of=None, **kwargs):
            del repeat_of
            return ilp_extract_itself(*args, **kwargs)
        with mock.patch.object(extract, "ilp_extract", wraps=extract.ilp_extract) as spy:
            result = equality_saturation(graph, rules, _COST, config)
        earlier = [call.kwargs["repeat_of"] for call in spy.call_args_list]
        self.assertEqual(result.ilp_status.split("+")[:2], ["optimal", "same"])
        self.assertIsNone(earlier[0])
        self.assertEqual(earlier[1].status, "optimal")
        with mock.patch.object(extract, "ilp_extract", solving_again):
            solved = equality_saturation(graph, rules, _COST, config)
        self.assertEqual(solved.ilp_status.split("+")[:2], ["optimal", "optimal"])
        self.assertEqual(result.best_cost, solved.best_cost)
        self.assertEqual(result.ilp_cost, solved.ilp_cost)


class CpuLimitTest(absltest.TestCase):

    def test_highs_stops_on_its_cpu_time_with_its_best_so_far(self):
        # The thread's CPU clock, as `_solve` reads it, runs out as soon as
        # HiGHS first checks its limits: it stops there (its interrupt
        # callback), with a solution no costlier than its start.
        eg, roots, costs, start = grown("squeezenet1_1", "tensat", 3, _COST)
        eg.filter_cycles_by_age(start)
        calls = itertools.count()

        def clock() -> float:
            # ilp_extract's start, its time left, _solve's start; then late.
            return 0.0 if next(calls) < 3 else 1e6
        with mock.patch.object(extract.time, "thread_time", clock):
            ilp = ilp_extract(eg, roots, costs, 5, start=start, skip_proven=False)
        self.assertEqual(ilp.status, "cpu_limit")
        self.assertTrue(ilp.choice)
        self.assertLessEqual(ilp.dag_cost, dag_cost(eg, start, roots, costs) + 1e-12)
        build_graph(eg, ilp.choice, roots)  # acyclic, complete

    def test_cpu_seconds_are_reported(self):
        eg, roots, costs = shared_sub_graph()
        ilp = ilp_extract(eg, roots, costs, 10)
        self.assertGreater(ilp.cpu_seconds, 0.0)
        self.assertLess(ilp.cpu_seconds, 10.0)


class HighsOptionsTest(absltest.TestCase):

    def _solve(self, program, start, options):
        """`_solve`, and the options it set on HiGHS (name -> value)."""
        import highspy  # pylint: disable=import-outside-toplevel
        set_options = {}
        original = highspy.Highs.setOptionValue

        def recording(h, name, value):
            set_options[name] = value
            return original(h, name, value)
        with mock.patch.object(highspy.Highs, "setOptionValue", recording):
            solved = extract._solve(program, start, 60.0, options)
        return solved, set_options

    def test_heuristics_off_change_no_optimum(self):
        # Both acyclic programs of a grown e-graph, started from the
        # original graph (each class's oldest e-node), which costs more than
        # the optimum: solved with HiGHS's defaults and with its heuristics
        # off, started or not, the same optimum; the options are set only
        # where given.
        eg, roots, costs, _ = grown("squeezenet1_1", "tensat", 3, _COST)
        start = used(eg, {c: min(eg.live_nodes(c)) for c in extract._reachable(eg, roots)},
                     roots)
        build_graph(eg, start, roots)  # acyclic, complete
        order = tree_costs(eg, roots, costs)
        for program_name in ("walk", "age"):
            filter_for_program(eg, program_name, roots, order, start)
            program = _Program(eg, roots, costs, start)
            program.build()
            plain, plain_options = self._solve(program, start, None)
            quiet, quiet_options = self._solve(program, start, extract.HIGHS_HEURISTICS_OFF)
            unstarted, unstarted_options = self._solve(program, None,
                                                       extract.HIGHS_HEURISTICS_OFF)
            for name, solved in (("defaults", plain), ("started", quiet),
                                 ("no start", unstarted)):
                self.assertEqual(solved.status, "optimal", (program_name, name))
            optimum = float(program.objective @ plain.x)
            self.assertLess(optimum, float(program.objective @ program.solution_of(start)))
            for solved in (quiet, unstarted):
                self.assertAlmostEqual(float(program.objective @ solved.x), optimum,
                                       delta=1e-9 * optimum)
            for name, value in extract.HIGHS_HEURISTICS_OFF.items():
                self.assertEqual(quiet_options[name], value)
                self.assertEqual(unstarted_options[name], value)
                self.assertNotIn(name, plain_options)

    def test_the_config_chooses_the_heuristics(self):
        graph = zoo.get_graph("squeezenet1_1")
        for heuristics, want in ((True, None), (False, extract.HIGHS_HEURISTICS_OFF)):
            with mock.patch.object(extract, "ilp_extract", wraps=extract.ilp_extract) as spy:
                equality_saturation(graph, XferSet.from_name("tensat"), _COST,
                                    EqsatConfig(check_outputs=False,
                                                ilp_heuristics=heuristics))
            self.assertNotEmpty(spy.call_args_list)
            for call in spy.call_args_list:
                self.assertIs(call.kwargs["highs_options"], want)

    def test_an_option_highs_rejects_raises(self):
        eg, roots, costs = shared_sub_graph()
        program = _Program(eg, roots, costs)
        program.build()
        with self.assertRaises(ValueError):
            extract._solve(program, None, 10.0, {"mip_heuristic_effort": "much"})


if __name__ == "__main__":
    absltest.main()
