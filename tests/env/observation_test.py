"""The environment's observations are bitwise those of the reference
implementation: the per-xfer, per-location Python loops that `GraphEnv`
used before its features were vectorised, kept here as the oracle.

Every zoo graph (the small `zoo.REDUCED` variants where there are any), every
`cost_features` mode, over a few random-agent steps; every array of the
`Observation` and of its `GraphsTuple` is compared byte for byte.
"""

from absl.testing import absltest, parameterized
import numpy as np

from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.embedding import features
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.environment import COST_FEATURES, XFER_SUMMARY_SIZE, _delta_stats
from xflowrl.env.interface import LocationFeatures, Observation

_XFERS = XferSet.default()
_COST = CostModel("analytic")
_STEPS = 4


def _reference_costs(locs, cost_model):
    """`Locations.costs` as it was: one Python loop over the xfers."""
    out = np.full((locs.num_xfers, locs.max_locations), np.nan)
    for x, row in enumerate(locs._handle.costs(cost_model.handle)):  # pylint: disable=protected-access
        if row:
            out[x, :len(row)] = row
    return out


def reference_observation(env: GraphEnv, locs=None) -> Observation:
    """The observation of `env`'s current state, computed as `GraphEnv`
    did before vectorisation (loops over xfers and locations, `structure()`
    read once per use): the oracle. `locs`: the state's `Locations`
    (enumerated here if None; benchmarks/observation_bench.py passes them)."""
    cfg, graph = env.config, env.graph
    if locs is None:
        locs = env.xfers.locations(graph, cfg.max_locations,
                                   int(cfg.max_ops_factor * env.initial_graph.num_ops()))
    n, num_l, k = env.num_xfers, cfg.max_locations, env.max_pattern_ops
    if cfg.cost_features == "none":
        no_costs = np.zeros(len(graph.structure()["types"]), np.float32)
        graph_tuple = features.featurize(graph, no_costs, 0.0, 1.0)
    else:
        graph_tuple = features.featurize(graph, graph.op_costs(env.cost_model), env.cost,
                                         env.initial_cost)
    nodes = np.full((n + 1, num_l, k), -1, np.int32)
    cost_delta = np.zeros((n + 1, num_l), np.float32)
    summary = np.zeros((n + 1, XFER_SUMMARY_SIZE), np.float32)
    active = [x for x, c in enumerate(locs.counts) if c > 0]
    if active:
        guids = graph.structure()["guids"]
        index_of = np.full(int(guids.max()) + 1, -1, np.int32)
        index_of[guids] = np.arange(len(guids), dtype=np.int32)
        costs = (_reference_costs(locs, env.cost_model) if cfg.cost_features == "full"
                 else None)
        for x in active:
            c = locs.counts[x]
            for l, matched in enumerate(locs.matched_ops(x)):
                nodes[x, l, :len(matched)] = index_of[matched]
            summary[x, 0] = np.log1p(c)
            if costs is not None:
                delta = 100.0 * (costs[x, :c] - env.cost) / env.initial_cost
                cost_delta[x, :c] = delta
                summary[x, 1:] = (delta.min(), delta.mean())
    counts = np.asarray(locs.counts + [0])
    return Observation(
        state=graph_tuple,
        locations=LocationFeatures(np.asarray(active, np.int64), nodes[active],
                                   cost_delta[active], summary),
        location_mask=np.arange(num_l) < counts[:, None],
        xfer_mask=np.array([c > 0 for c in locs.counts] + [True], dtype=bool))


def _arrays(observation: Observation):
    """(name, array) for every array of an observation, its GraphsTuple's
    fields included."""
    state = observation.state
    for field in ("nodes", "edges", "globals", "senders", "receivers", "n_node", "n_edge"):
        yield f"state.{field}", getattr(state, field)
    for field in LocationFeatures._fields:
        yield f"locations.{field}", getattr(observation.locations, field)
    yield "location_mask", observation.location_mask
    yield "xfer_mask", observation.xfer_mask


def _graph(name: str):
    return zoo.get_graph(name, **zoo.REDUCED.get(name, {}))


class ObservationTest(parameterized.TestCase):

    def assert_bitwise_equal(self, actual: Observation, expected: Observation, where: str):
        for (name, a), (_, b) in zip(_arrays(actual), _arrays(expected)):
            a, b = np.asarray(a), np.asarray(b)
            self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), f"{where} {name}")
            self.assertTrue(a.tobytes() == b.tobytes(),
                            f"{where} {name}: {np.count_nonzero(a != b)} entries differ")

    def assert_episode_matches(self, graph_name: str, config: EnvConfig, seed: int = 0):
        """Observations of a seeded random-agent episode equal the oracle's
        at every step; returns how many locations were seen in all."""
        env = GraphEnv(_graph(graph_name), _XFERS, _COST, config)
        agent = RandomAgent(seed=seed)
        obs, done, locations = env.reset(), False, 0
        for step in range(_STEPS + 1):
            self.assert_bitwise_equal(obs, reference_observation(env),
                                      f"{graph_name} {config.cost_features} step {step}")
            locations += int(obs.location_mask.sum())
            if done or step == _STEPS:
                break
            obs, _, done, _ = env.step(agent.act(obs))
        return locations

    @parameterized.parameters(*zoo.GRAPHS)
    def test_every_cost_mode_matches_the_loops(self, graph_name):
        for mode in COST_FEATURES:
            with self.subTest(mode):
                self.assert_episode_matches(graph_name, EnvConfig(cost_features=mode))

    def test_truncated_locations_match_the_loops(self):
        # L=3: most xfers have more locations than kept.
        locations = self.assert_episode_matches("resnet18", EnvConfig(max_locations=3))
        self.assertGreater(locations, 0)

    def test_active_rows_equal_the_full_arrays(self):
        graph = _graph("inception_v3")
        locs = _XFERS.locations(graph)
        active = locs.active_xfers()
        self.assertGreater(len(active), 1)
        full = locs.costs(_COST)
        np.testing.assert_array_equal(np.flatnonzero(~np.isnan(full).all(axis=1)), active)
        self.assertEqual(locs.active_costs(_COST).tobytes(), full[active].tobytes())
        counts = np.asarray(locs.counts + [0])
        np.testing.assert_array_equal(locs.location_mask(),
                                      np.arange(locs.max_locations) < counts[:, None])
        np.testing.assert_array_equal(locs.count_array, locs.counts)

    def test_masked_mean_is_the_slice_mean_bitwise(self):
        # _delta_stats relies on numpy summing a masked row pairwise exactly
        # as it sums the row's valid slice; random rows of every length.
        rng = np.random.default_rng(0)
        num_l = 200
        counts = np.arange(1, num_l + 1)
        costs = rng.lognormal(3.0, 2.0, size=(num_l, num_l))
        valid = np.arange(num_l) < counts[:, None]
        costs[~valid] = np.nan
        delta, low, mean = _delta_stats(costs, valid, counts, 17.0, 123.0)
        for row, c in enumerate(counts):
            expected = 100.0 * (costs[row, :c] - 17.0) / 123.0
            self.assertEqual(mean[row].tobytes(), expected.mean().tobytes(), f"row {row}")
            self.assertEqual(low[row], expected.min())
            self.assertEqual(delta[row, :c].tobytes(), expected.tobytes())
            self.assertFalse(delta[row, c:].any())


if __name__ == "__main__":
    absltest.main()
