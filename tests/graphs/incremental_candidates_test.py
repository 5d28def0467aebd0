"""Incremental candidates (docs/engine.md, "Locations") against full rebuilds.

`XferSet.locations` describes each candidate by what it changes and computes
its hash, op count and (context-free backends) cost from the current graph's;
`incremental=False` builds every candidate graph whole, as the engine did
before. On every zoo graph (the reduced variant where one exists) and every
named rule set, both must give the same locations, matched ops and hashes,
and each candidate's cost must equal its whole graph's `cost` for every
backend to 1e-9 relative; `apply` must return the graph the hash promised.
"""

import math

from absl.testing import absltest, parameterized

from xflowrl.graphs import CostModel, XferSet, zoo
from xflowrl.graphs.xfers import RULE_SETS

MAX_LOCATIONS = 200
REL_TOL = 1e-9


def _graph(name):
    return zoo.get_graph(name, **zoo.REDUCED.get(name, {}))


def _backends():
    """Every backend the tests can build here: analytic cpu and v100, fitted
    cpu, and onednn through its shipped reference table where built."""
    models = [CostModel("analytic", profile="cpu"), CostModel("analytic", profile="v100"),
              CostModel("fitted", profile="cpu")]
    try:
        models.append(CostModel("onednn", reference=True))
    except ValueError:  # engine built without oneDNN
        pass
    return models


class IncrementalCandidatesTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rule_sets = {name: XferSet.from_name(name) for name in RULE_SETS}
        cls.backends = _backends()

    def _compare(self, graph, xfers, where):
        """Incremental vs whole enumeration of `graph`; returns the
        incremental locations."""
        new = xfers.locations(graph, MAX_LOCATIONS)
        old = xfers.locations(graph, MAX_LOCATIONS, incremental=False)
        self.assertEqual(new.counts, old.counts, where)
        self.assertEqual(new._handle.num_matches(), old._handle.num_matches(), where)
        self.assertEqual(new.hashes(), old.hashes(), where)
        for x, count in enumerate(new.counts):
            if count:
                self.assertEqual(new.matched_ops(x), old.matched_ops(x), where)
        for model in self.backends:
            new_costs = new.costs(model)
            for x, count in enumerate(new.counts):
                for l in range(count):
                    whole = old.apply(x, l).cost(model)
                    self.assertTrue(
                        math.isclose(new_costs[x, l], whole, rel_tol=REL_TOL, abs_tol=1e-12),
                        f"{where} {model.name} xfer {x} location {l}: "
                        f"{new_costs[x, l]!r} vs whole {whole!r}")
        hashes = new.hashes()
        for x, count in enumerate(new.counts):
            for l in range(count):
                built, rebuilt = new.apply(x, l), old.apply(x, l)
                self.assertEqual(built.hash(), hashes[x][l], where)
                self.assertEqual(built.num_ops(), rebuilt.num_ops(), where)
                structure, expected = built.structure(), rebuilt.structure()
                self.assertEqual(structure["guids"].tolist(), expected["guids"].tolist(), where)
                self.assertEqual(structure["types"].tolist(), expected["types"].tolist(), where)
        return new

    @parameterized.parameters(*zoo.GRAPHS)
    def test_same_locations_hashes_and_costs(self, name):
        graph = _graph(name)
        for rules, xfers in self.rule_sets.items():
            locs = self._compare(graph, xfers, f"{name}/{rules}")
            # One step further: candidates of a rewritten graph (fresh guids,
            # cloned readers) from the first and last applicable xfer.
            active = [x for x, count in enumerate(locs.counts) if count]
            for x in sorted({active[0], active[-1]} if active else ()):
                self._compare(locs.apply(x, 0), xfers, f"{name}/{rules} after xfer {x}")


class SearchUnchangedTest(absltest.TestCase):
    """The search prices candidates incrementally; its results must be those
    of whole-graph pricing, recorded with the engine before the change
    (commit 48ae3ae) by the same call."""

    # (graph, rules, backend) -> (best cost, expansions, applied xfers, enqueued)
    RECORDED = {}

    def test_search_results_as_recorded(self):
        self.skipTest("filled in below")


if __name__ == "__main__":
    absltest.main()
