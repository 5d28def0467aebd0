"""The native engine in several Python threads at once (docs/engine.md,
"Threads").

`XferSet.search`, `XferSet.locations`, `Locations.costs`, `Locations.hashes`,
`Locations.apply`, `Graph.cost` and `Graph.op_costs` release the GIL while
the engine works; searches, enumerations, pricings and reads of one
Locations' caches running at once on one graph (one Locations included),
with one cost model or several, must each give what they give alone, and
another Python thread must run while a search, the hashes or a measurement
do. The C++ side of the same contract is tested
under ThreadSanitizer with `SANITIZE=thread scripts/engine_tests.sh`
(third_party/taso/tests/threads_test.cc).
"""

import threading
import time

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, GraphBuilder, XferSet, available_backends


def _in_threads(calls):
    """Runs each call in its own thread, all at once; their results in order."""
    results = [None] * len(calls)
    errors = []

    def run(k):
        try:
            results[k] = calls[k]()
        except Exception as e:  # re-raised in the calling thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _ticks_while(work):
    """Runs `work` (which returns the (start, end) spans of the calls to
    time) in a thread while this one ticks every millisecond; the ticks that
    fall in the middle half of some span, and the spans' total length."""
    spans = []
    worker = threading.Thread(target=lambda: spans.extend(work()))
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    inside = [t for t in ticks
              if any(a + 0.25 * (b - a) < t < b - 0.25 * (b - a) for a, b in spans)]
    return inside, sum(b - a for a, b in spans)


def _outcome(result):
    return (result.graph.hash(), result.best_cost, tuple(result.applied),
            result.expansions, result.enqueued, result.seen)


class ThreadsTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.xfers = XferSet.from_name("default")

    def test_searches_at_once_give_what_they_give_alone(self):
        analytic, fitted = CostModel("analytic"), CostModel("fitted")
        alone = {name: _outcome(self.xfers.search(zoo.get_graph("squeezenet1_1"), model,
                                                  budget=40))
                 for name, model in (("analytic", analytic), ("fitted", fitted))}
        self.assertTrue(alone["analytic"][2])  # the search found rewrites
        shared = zoo.get_graph("squeezenet1_1")
        models = [analytic, fitted, analytic, fitted]
        results = _in_threads([lambda m=m: self.xfers.search(shared, m, budget=40)
                               for m in models])
        for model, result in zip(models, results):
            name = "analytic" if model is analytic else "fitted"
            self.assertEqual(_outcome(result), alone[name])

    def test_enumerations_at_once_give_what_they_give_alone(self):
        graph = zoo.get_graph("inception_v3")
        cost = CostModel("fitted")
        alone = self.xfers.locations(graph)
        expected = (alone.counts, alone.hashes(), alone.costs(cost).tobytes())

        def enumerate_once():
            locs = self.xfers.locations(graph)
            return locs.counts, locs.hashes(), locs.costs(cost).tobytes()

        for result in _in_threads([enumerate_once] * 4):
            self.assertEqual(result, expected)

    def test_one_locations_priced_at_once(self):
        graph = zoo.get_graph("nasnet_a")
        cost = CostModel("fitted")
        locs = self.xfers.locations(graph)
        expected = locs.costs(cost).tobytes()
        for result in _in_threads([lambda: locs.costs(cost).tobytes()] * 4):
            self.assertEqual(result, expected)

    def test_one_locations_read_at_once(self):
        # hashes, apply (a candidate's graph) and num_materialized fill or
        # read the candidates' caches without the GIL, one at a time.
        graph = zoo.get_graph("inception_v3")
        alone = self.xfers.locations(graph, max_locations=1000)
        active = [int(x) for x in alone.active_xfers()]
        actions = [(x, l) for x in active for l in range(min(alone.counts[x], 10))]
        expected = (alone.hashes(), [alone.apply(x, l).hash() for x, l in actions])
        self.assertGreater(len(actions), 20)
        shared = self.xfers.locations(graph, max_locations=1000)

        def read(k):
            order = actions[k:] + actions[:k]  # each thread in its own order
            graphs = dict(((x, l), shared.apply(x, l).hash()) for x, l in order)
            materialized = shared._handle.num_materialized()
            return shared.hashes(), [graphs[a] for a in actions], materialized

        for hashes, graphs, materialized in _in_threads([lambda k=k: read(k)
                                                         for k in range(4)]):
            self.assertEqual((hashes, graphs), expected)
            self.assertLessEqual(materialized, len(actions))
        self.assertEqual(shared._handle.num_materialized(), alone._handle.num_materialized())

    def test_hashes_release_the_gil(self):
        graph = zoo.get_graph("inception_v3")
        xfers = XferSet.from_name("taso")

        def work():
            spans = []
            while sum(b - a for a, b in spans) < 0.3 and len(spans) < 1000:
                locs = xfers.locations(graph, max_locations=1000)  # hashes not yet computed
                start = time.perf_counter()
                locs.hashes()
                spans.append((start, time.perf_counter()))
            return spans

        inside, total = _ticks_while(work)
        self.assertGreater(total, 0.2, "the hashes must take long enough to tell")
        # Holding the GIL, hashes() would let this thread tick only between
        # calls; released, it ticks within them.
        self.assertGreater(len(inside), 10)

    def test_measuring_releases_the_gil(self):
        if "onednn" not in available_backends():
            self.skipTest("built without oneDNN")
        b = GraphBuilder()
        y = b.input(name="x", shape=(1, 8, 16, 16))
        for k in range(4):  # distinct configurations: each is measured
            y = b.conv2d(input=y, weight=b.weight(name=f"w{k}", shape=(8 + 4 * k + 4,
                                                                   8 + 4 * k, 3, 3)))
        graph = b.build([y])

        def work():
            start = time.perf_counter()
            graph.cost(CostModel("onednn", repeats=3, warmup=1))
            return [(start, time.perf_counter())]

        inside, total = _ticks_while(work)
        self.assertGreater(total, 0.1, "the measurement must take long enough to tell")
        self.assertGreater(len(inside), 10)

    def test_search_releases_the_gil(self):
        graph = zoo.get_graph("inception_v3")
        cost = CostModel("analytic")

        def work():
            start = time.perf_counter()
            self.xfers.search(graph, cost, budget=30)
            return [(start, time.perf_counter())]

        # Holding the GIL, the search would let this thread run at most
        # around its start; released, this thread ticks all along.
        inside, total = _ticks_while(work)
        self.assertGreater(total, 0.2, "the search must run long enough to tell")
        self.assertGreater(len(inside), 10)


if __name__ == "__main__":
    absltest.main()
