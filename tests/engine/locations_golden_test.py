"""Locations, their order, matched ops, candidate costs and the graphs that
`apply` returns, on every zoo graph, against digests recorded by an earlier
engine (tests/engine/testdata/locations_digest.json): engine speed-ups must
not change what the environment sees.

Regenerate (only when a change of locations is intended, and say so):

    PYTHONPATH=. python tests/engine/locations_golden_test.py --write
"""

import hashlib
import json
import os
import sys

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet

DIGESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata",
                       "locations_digest.json")
MAX_LOCATIONS = 200


def fingerprint(name: str, xfers: XferSet, cost: CostModel) -> dict:
    """Digest of everything the environment reads from the locations on zoo
    graph `name` and on two graphs one step further (the first location of
    the first and of the last xfer that applies): counts, and per location
    the matched guids, the candidate's cost, hash and op order (guids and
    types)."""
    graph = zoo.get_graph(name)
    digest = hashlib.sha256()
    locs = _digest_step(graph, xfers, cost, digest)
    active = [x for x, count in enumerate(locs.counts) if count]
    for x in sorted({active[0], active[-1]} if active else ()):
        _digest_step(locs.apply(x, 0), xfers, cost, digest)
    return {"locations": int(sum(locs.counts)), "sha256": digest.hexdigest()}


def _digest_step(graph, xfers, cost, digest):
    """Feeds one step's locations on `graph` into `digest`; returns them."""
    locs = xfers.locations(graph, MAX_LOCATIONS)
    costs = locs.costs(cost)
    digest.update(repr(locs.counts).encode())
    for x, count in enumerate(locs.counts):
        if not count:
            continue
        matched = locs.matched_ops(x)
        for l in range(count):
            candidate = locs.apply(x, l)
            structure = candidate.structure()
            digest.update(repr((x, l, matched[l], round(float(costs[x, l]), 9),
                                candidate.hash(), structure["guids"].tolist(),
                                structure["types"].tolist())).encode())
    return locs


def fingerprints() -> dict:
    xfers, cost = XferSet.default(), CostModel("analytic")
    return {name: fingerprint(name, xfers, cost) for name in zoo.GRAPHS}


class LocationsGoldenTest(absltest.TestCase):

    def test_every_zoo_graph_enumerates_as_recorded(self):
        with open(DIGESTS) as f:
            recorded = json.load(f)
        self.assertEqual(sorted(recorded), sorted(zoo.GRAPHS))
        xfers, cost = XferSet.default(), CostModel("analytic")
        for name in zoo.GRAPHS:
            with self.subTest(graph=name):
                self.assertEqual(fingerprint(name, xfers, cost), recorded[name])


if __name__ == "__main__":
    if "--write" in sys.argv:
        with open(DIGESTS, "w") as f:
            json.dump(fingerprints(), f, indent=1, sort_keys=True)
        print("wrote", DIGESTS)
    else:
        absltest.main()
