"""Tests of the child process HiGHS runs in (xflowrl.search.eqsat.child) and
of the ILP across it: a call returns what the function returns, raises
what it raises, is stopped at its deadline with what it had reported, and
survives a child that dies; HiGHS's answers are the same in the child as
on the calling thread, and what it reports on the way are solutions."""

import os
import threading
import time

from absl.testing import absltest
import numpy as np

from tests.search.egraph_fixtures import grown, shared_sub_graph
from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.search.eqsat import (
    EqsatConfig,
    child,
    equality_saturation,
    extract,
    ilp_extract,
)
from xflowrl.search.eqsat.extract import _Program, tree_costs, used
from xflowrl.search.eqsat.saturation import filter_for_program

_COST = cost_model_from_spec("analytic/v100")


def _add(a, b, report):
    report(a)
    return a + b


def _report_then_spin(values, report):
    for v in values:
        report(v)
    end = time.time() + 60
    while time.time() < end:
        pass
    return "never"


def _fail(message, report):
    raise KeyError(message)


def _die(report):
    os._exit(3)  # pylint: disable=protected-access


def _pid(report):
    return os.getpid()


@absltest.skipUnless(child.available(), "no fork on this platform")
class ChildTest(absltest.TestCase):

    def test_a_call_returns_the_value_and_the_child_is_kept(self):
        first = child.call(_add, (2, 3), time.time() + 30)
        self.assertTrue(first.finished)
        self.assertEqual(first.value, 5)
        self.assertEqual(first.partial, 2)
        self.assertIsNone(first.died)
        self.assertGreaterEqual(first.cpu_seconds, 0.0)
        pid = child.call(_pid, (), time.time() + 30).value
        self.assertNotEqual(pid, os.getpid())
        self.assertEqual(child.call(_pid, (), time.time() + 30).value, pid)

    def test_the_deadline_stops_the_call_with_what_it_reported(self):
        before_pid = child.call(_pid, (), time.time() + 30).value
        before_cpu = child.cpu_seconds()
        clock = time.time()
        stopped = child.call(_report_then_spin, ([1, 2, 3],), clock + 0.5)
        waited = time.time() - clock
        self.assertFalse(stopped.finished)
        self.assertIsNone(stopped.value)
        self.assertEqual(stopped.partial, 3)
        self.assertIsNone(stopped.died)
        self.assertGreaterEqual(waited, 0.5)
        self.assertLess(waited, 10.0)
        # The spinning child's CPU is counted, though it never reported it.
        self.assertGreater(stopped.cpu_seconds, 0.05)
        self.assertGreaterEqual(child.cpu_seconds() - before_cpu, stopped.cpu_seconds)
        with self.assertRaises(ProcessLookupError):
            os.kill(before_pid, 0)   # killed and reaped
        # The next call runs in a new child.
        after = child.call(_pid, (), time.time() + 30)
        self.assertTrue(after.finished)
        self.assertNotEqual(after.value, before_pid)

    def test_an_exception_is_raised_again_and_the_child_kept(self):
        pid = child.call(_pid, (), time.time() + 30).value
        with self.assertRaisesRegex(KeyError, "no such rule"):
            child.call(_fail, ("no such rule",), time.time() + 30)
        self.assertEqual(child.call(_pid, (), time.time() + 30).value, pid)

    def test_a_child_forked_from_another_thread_serves(self):
        # The child a thread forks (the one calling) serves as one forked by
        # the main thread: the first call after a stopped child forks anew.
        child.call(_report_then_spin, ([0],), time.time() + 0.2)
        out = []
        thread = threading.Thread(
            target=lambda: out.append(child.call(_add, (4, 5), time.time() + 30)))
        thread.start()
        thread.join(60)
        self.assertTrue(out and out[0].finished)
        self.assertEqual(out[0].value, 9)

    def test_a_child_that_dies_is_replaced(self):
        died = child.call(_die, (), time.time() + 30)
        self.assertFalse(died.finished)
        self.assertIsNotNone(died.died)
        self.assertEqual(child.call(_add, (1, 1), time.time() + 30).value, 2)


def _grown_program(name: str, rules: str, iterations: int):
    """`grown`, filtered for the depth-first walk's program."""
    eg, roots, costs, start = grown(name, rules, iterations, _COST)
    filter_for_program(eg, "walk", roots, tree_costs(eg, roots, costs), start)
    return eg, roots, costs, start


@absltest.skipUnless(child.available(), "no fork on this platform")
class HighsInChildTest(absltest.TestCase):

    def test_the_same_answer_in_the_child_and_on_this_thread(self):
        eg, roots, costs, start = _grown_program("squeezenet1_1", "tensat", 3)
        here = ilp_extract(eg, roots, costs, 60.0, start=start, skip_proven=False)
        there = ilp_extract(eg, roots, costs, 60.0, start=start, skip_proven=False,
                            deadline=time.time() + 120)
        self.assertEqual(here.status, "optimal")
        self.assertEqual(there.status, "optimal")
        self.assertEqual(there.choice, here.choice)
        self.assertAlmostEqual(there.dag_cost, here.dag_cost, delta=1e-12)
        self.assertAlmostEqual(there.bound, here.bound, delta=1e-9)
        self.assertGreater(there.cpu_seconds, 0.0)

    def test_what_highs_reports_on_the_way_are_solutions_getting_cheaper(self):
        # Each incumbent HiGHS takes (the start too, where it takes it as
        # its first), in the program's own columns: each satisfies every
        # row and costs no more than the one before; the last is the answer,
        # cheaper than the start.
        eg, roots, costs, _ = grown("squeezenet1_1", "tensat", 3, _COST)
        start = used(eg, {c: min(eg.live_nodes(c)) for c in extract._reachable(eg, roots)},
                     roots)   # the original graph: costlier than the optimum
        filter_for_program(eg, "walk", roots, tree_costs(eg, roots, costs), start)
        program = _Program(eg, roots, costs, start)
        program.build()
        reported = []
        solved = extract._run_highs(extract._request(program, start, 60.0), reported.append)
        self.assertEqual(solved.status, "optimal")
        self.assertNotEmpty(reported)
        matrix = program.matrix()
        objectives = []
        for x in reported:
            self.assertEqual(len(x), program.num_vars)
            activity = matrix @ x
            self.assertTrue(np.all(activity >= np.asarray(program.lower) - 1e-6))
            self.assertTrue(np.all(activity <= np.asarray(program.upper) + 1e-6))
            objectives.append(float(program.objective @ x))
        start_objective = float(program.objective @ program.solution_of(start))
        self.assertEqual(objectives, sorted(objectives, reverse=True))
        self.assertLessEqual(objectives[0], start_objective)
        self.assertLess(objectives[-1], start_objective)
        self.assertAlmostEqual(objectives[-1], float(program.objective @ solved.x),
                               delta=1e-6 * objectives[-1])

    def test_a_solve_says_where_it_ran(self):
        # `ilp_extract` counts HiGHS's CPU apart only where it ran in the
        # child (on this thread, its own clock already has it).
        eg, roots, costs = shared_sub_graph()
        program = _Program(eg, roots, costs)
        program.build()
        here = extract._solve(program, None, 10.0)
        there = extract._solve(program, None, 10.0, deadline=time.time() + 60)
        self.assertFalse(here.in_child)
        self.assertTrue(there.in_child)
        self.assertEqual((here.status, there.status), ("optimal", "optimal"))
        np.testing.assert_array_equal(here.x, there.x)

    def test_a_deadline_already_past_solves_nothing(self):
        eg, roots, costs = shared_sub_graph()
        ilp = ilp_extract(eg, roots, costs, 10.0, deadline=time.time() - 1)
        self.assertEqual(ilp.status, "deadline")
        self.assertEqual(ilp.choice, {})

    def test_a_run_stops_highs_at_its_total_time_limit(self):
        # NasRNN under TASO's rules: HiGHS needs seconds past saturation's
        # fraction of one; with 2 s for the whole run its process is
        # stopped, and the run still hands over a graph no costlier than
        # greedy extraction's, cheaper than the input.
        graph = zoo.get_graph("nasrnn")
        rules = XferSet.from_name("taso")
        config = EqsatConfig(check_outputs=False, total_time_limit_s=2.0)
        clock = time.time()
        result = equality_saturation(graph, rules, _COST, config)
        self.assertIn("deadline", result.ilp_status)
        self.assertLess(time.time() - clock, 2.0 + 5.0)
        self.assertLessEqual(result.best_cost, result.greedy_cost)
        self.assertLess(result.best_cost, result.initial_cost)

    def test_a_run_hands_over_the_same_graph_either_way(self):
        graph = zoo.get_graph("squeezenet1_1")
        rules = XferSet.from_name("tensat")
        results = [equality_saturation(graph, rules, _COST,
                                       EqsatConfig(check_outputs=False, ilp_in_child=flag))
                   for flag in (False, True)]
        self.assertEqual(results[0].best_cost, results[1].best_cost)
        self.assertEqual(results[0].ilp_status, results[1].ilp_status)
        self.assertEqual(results[0].graph.to_data(), results[1].graph.to_data())


if __name__ == "__main__":
    absltest.main()
