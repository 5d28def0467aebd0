"""Tests of the NumPy policy runtime (`xflowrl.policy.runtime`) against the
TensorFlow network it copies: the same logits to float32 rounding at every
state of greedy episodes, for the shipped policy and for an untrained
network of another seed and size; every action it takes is a greedy action
of the network (near-ties among equivalent locations may fall either way);
the arrays round-trip through a policy folder, the shipped folder's arrays
are its checkpoint's, and the `xflowrl optimize --method=policy` path runs
without importing TensorFlow."""

import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from xflowrl import corpus, policy
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.networks import relative_location_cost
from xflowrl.embedding import features
from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.replay import cheapest_prefix
from xflowrl.generalist import evaluate
from xflowrl.policy import load_policy, runtime, shipped_policy

GRAPHS = ("resnet/d32w16", "nasnet/s1n2w16", "bert/l6h128a8s64", "inception/a1c1w16")
STEPS = 12
# float32 rounding of two orders of summation, on logits of size ~1-10.
TOLERANCE = 2e-4


def _env(name, xfers, cost, steps=STEPS):
    return GraphEnv(corpus.get(name), xfers, cost, EnvConfig(max_steps=steps))


def _network_logits(network, obs, xfer):
    """The TensorFlow network's xfer logits [N+1] and `xfer`'s location
    logits [L] at `obs` (as the actor computes them)."""
    loc = obs.location_features()
    embedding = network.encode(features.to_tensors(obs.state))
    xfer_logits = network.xfer_head(embedding.globals, loc.xfer_summary[None],
                                    obs.xfer_mask[None]).logits[0].numpy()
    mask = obs.location_mask[xfer]
    if not mask.any():
        return xfer_logits, None
    location_logits = network.location_head(
        embedding, tf.constant([xfer]), loc.nodes_of(xfer)[None], loc.cost_delta_of(xfer)[None],
        None, mask[None]).logits[0].numpy()
    return xfer_logits, location_logits


class ParityMixin:
    """Checks a network against its NumPy copy along greedy episodes."""

    def check_parity(self, agent, env_of, graphs):
        numpy_policy = runtime.NumpyPolicy(runtime.network_arrays(agent.network))
        compared = 0
        for name in graphs:
            env = env_of(name)
            # Along the network's own greedy episode and along the copy's.
            for act in (lambda o: tuple(agent.actor.act(o, greedy=True)[:2]), numpy_policy.act):
                obs, done = env.reset(), False
                while not done:
                    x, location = numpy_policy.act(obs)
                    want_x, want_l = _network_logits(agent.network, obs, x)
                    nodes, graph_embedding = numpy_policy.encode(obs.state)
                    got_x = numpy_policy.xfer_logits(graph_embedding,
                                                     obs.location_features().xfer_summary,
                                                     obs.xfer_mask)
                    mask = obs.xfer_mask
                    np.testing.assert_allclose(got_x[mask], want_x[mask], rtol=TOLERANCE,
                                               atol=TOLERANCE, err_msg=name)
                    # The copy's xfer is a greedy xfer of the network.
                    self.assertGreaterEqual(want_x[x], want_x[mask].max() - TOLERANCE, name)
                    if want_l is not None:
                        loc = obs.location_features()
                        lmask = obs.location_mask[x]
                        got_l = numpy_policy.location_logits(
                            nodes, graph_embedding, x, loc.nodes_of(x), loc.cost_delta_of(x),
                            lmask)
                        np.testing.assert_allclose(got_l[lmask], want_l[lmask], rtol=TOLERANCE,
                                                   atol=TOLERANCE, err_msg=name)
                        self.assertGreaterEqual(want_l[location],
                                                want_l[lmask].max() - TOLERANCE, name)
                    else:
                        self.assertEqual(location, 0)
                    compared += 1
                    obs, _, done, _ = env.step(act(obs))
        return compared


class ShippedPolicyParityTest(ParityMixin, absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.cost = cost_model_from_spec(GPU_COST_SPEC)

    def env_of(self, name):
        return _env(name, self.xfers, self.cost)

    def test_same_logits_and_greedy_actions_as_the_network(self):
        agent = load_policy(shipped_policy(), self.env_of(GRAPHS[0]))
        self.assertGreater(self.check_parity(agent, self.env_of, GRAPHS), 4 * STEPS)

    def test_the_shipped_arrays_are_the_shipped_checkpoints(self):
        agent = load_policy(shipped_policy(), self.env_of("mlp/s0"))
        want = runtime.network_arrays(agent.network)
        got = runtime.load_arrays(shipped_policy())
        self.assertEqual(sorted(got), sorted(want))
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)

    def test_untrained_network_of_another_size(self):
        env = self.env_of("squeezenet/f2w8")
        config = PPOConfig(latent_size=16, hidden_sizes=(24,), message_passing_steps=2,
                           xfer_embedding_size=8)
        agent = PPOAgent(len(self.xfers), config, seed=5)
        agent.build(env)
        self.assertGreater(self.check_parity(agent, self.env_of,
                                             ("squeezenet/f2w8", "transformer/s0")), STEPS)

    def test_untrained_network_reading_relative_location_costs(self):
        env = self.env_of("nasnet/s1n2w16")
        config = PPOConfig(latent_size=16, hidden_sizes=(24,), relative_location_cost=True)
        agent = PPOAgent(len(self.xfers), config, seed=3)
        agent.build(env)
        arrays = runtime.network_arrays(agent.network)
        self.assertTrue(runtime.NumpyPolicy(arrays).relative_location_cost)
        # The scorer reads one column more than without the option.
        self.assertEqual(arrays["location_scorer/0/w"].shape[0], 16 + 2 + 16 + 16)
        self.assertGreater(self.check_parity(agent, self.env_of,
                                             ("nasnet/s1n2w16", "resnet/d32w16")), STEPS)


class LogProbsTest(absltest.TestCase):
    """`NumpyPolicy.log_probs` and `evaluate.route_log_probs` against the
    log-probabilities the TensorFlow actor records for the actions it samples."""

    def test_a_sampled_episode_has_the_log_probs_the_actor_recorded(self):
        xfers, cost = XferSet.default(), cost_model_from_spec(GPU_COST_SPEC)
        checked, off_greedy = 0, 0
        for name in ("nasnet/s1n2w16", "bert/l6h128a8s64"):
            env = _env(name, xfers, cost)
            agent = load_policy(shipped_policy(), env, seed=3)
            numpy_policy = runtime.NumpyPolicy(runtime.network_arrays(agent.network))
            obs, done, sampled, applied = env.reset(), False, [], []
            while not done:
                action = agent.actor.act(obs, greedy=False)
                x, location = action.xfer, action.location
                got = numpy_policy.log_probs(obs, (x, location))
                np.testing.assert_allclose(got[:2], (action.xfer_log_prob,
                                                     action.location_log_prob),
                                           atol=TOLERANCE, err_msg=name)
                self.assertEqual(got[2], numpy_policy.act(obs) == (x, location))
                off_greedy += not got[2]
                sampled.append(action)
                obs, _, done, info = env.step((x, location))
                self.assertFalse(info["invalid"])  # real masks: only valid actions
                if x != len(xfers):
                    applied.append((xfers.names[x], location))
            # The route through the same substitutions, replayed.
            route = evaluate.route_log_probs(numpy_policy, env, applied)
            self.assertEqual([(s.xfer, s.location) for s in route], applied)
            kept = [a for a in sampled if a.xfer != len(xfers)]
            np.testing.assert_allclose([s.xfer_log_prob for s in route],
                                       [a.xfer_log_prob for a in kept], atol=TOLERANCE)
            np.testing.assert_allclose([s.location_log_prob for s in route],
                                       [a.location_log_prob for a in kept], atol=TOLERANCE)
            self.assertAlmostEqual(route[-1].cost_ms, env.cost)
            checked += len(route)
            # Summed up over the route to its cheapest graph.
            summary = evaluate.route_against(numpy_policy, env, applied)
            prefix = cheapest_prefix(env, applied)[1]
            own = {x for x, _ in runtime.greedy_episode(numpy_policy, env).applied}
            self.assertEqual(summary.steps, len(prefix))
            self.assertAlmostEqual(summary.log_prob, sum(
                s.xfer_log_prob + s.location_log_prob for s in route[:len(prefix)]), places=4)
            self.assertEqual([x for x, _ in summary.new_xfers],
                             [x for x, _ in prefix if x not in own])
            mine = evaluate.route_against(
                numpy_policy, env, runtime.greedy_episode(numpy_policy, env).applied)
            self.assertEqual((mine.off_greedy, mine.new_xfers), (0, []))
            self.assertGreater(mine.steps, 0)
        self.assertGreater(checked, 10)
        self.assertGreater(off_greedy, 0)  # the flag was seen both ways

    def test_refuses_masked_actions(self):
        xfers, cost = XferSet.default(), cost_model_from_spec(GPU_COST_SPEC)
        env = _env("nasnet/s1n2w16", xfers, cost)
        numpy_policy = runtime.NumpyPolicy.load(shipped_policy())
        obs = env.reset()
        masked = int(np.flatnonzero(~obs.xfer_mask)[0])
        with self.assertRaisesRegex(ValueError, "masked out"):
            numpy_policy.log_probs(obs, (masked, 0))
        x = int(np.flatnonzero(obs.xfer_mask[:-1])[0])
        beyond = int(obs.location_mask[x].sum())
        with self.assertRaisesRegex(ValueError, "masked out"):
            numpy_policy.log_probs(obs, (x, beyond))
        with self.assertRaisesRegex(ValueError, "unknown xfer"):
            evaluate.route_log_probs(numpy_policy, env, [("no_such_rule", 0)])


class RelativeCostTest(absltest.TestCase):

    def test_numpy_equals_the_network_row_by_row(self):
        rng = np.random.default_rng(0)
        cost_delta = rng.normal(size=(6, 5)).astype(np.float32)
        cost_delta[1] = 0.25                     # all equal
        cost_delta[2, :2] = cost_delta[2].min() - 1.0  # a tie for the cheapest
        mask = np.ones((6, 5), bool)
        mask[3, 1:] = False                      # one location
        mask[4, 3:] = False                      # padding beyond the prefix
        want = relative_location_cost(tf.constant(cost_delta), tf.constant(mask)).numpy()
        for row in range(6):
            valid = mask[row]
            got = runtime.relative_location_cost(cost_delta[row, valid])
            np.testing.assert_allclose(got, want[row, valid], rtol=1e-6, atol=1e-7)
            np.testing.assert_array_equal(want[row, ~valid], 0.0)
            self.assertEqual(got.min(), 0.0)
        np.testing.assert_array_equal(want[1], 0.0)
        np.testing.assert_array_equal(want[2, :2], 0.0)
        self.assertEqual(want[0].max(), 1.0)


class FolderTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="xflowrl-runtime-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.cost = cost_model_from_spec(GPU_COST_SPEC)

    def test_save_policy_writes_arrays_that_load_checked(self):
        xfers = XferSet.from_name("taso")
        env = _env("mlp/s0", xfers, self.cost)
        agent = PPOAgent(len(xfers), PPOConfig(latent_size=8, hidden_sizes=(8,)), seed=1)
        agent.build(env)
        policy.save_policy(agent, self.dir, policy.PolicyInfo(
            ppo={"latent_size": 8, "hidden_sizes": [8]}, rules="taso",
            num_xfers=len(xfers), max_locations=env.observation_spec().max_locations))
        self.assertTrue(policy.has_arrays(self.dir))
        policy.load_numpy_policy(self.dir, env)
        want, got = runtime.network_arrays(agent.network), runtime.load_arrays(self.dir)
        self.assertEqual(sorted(got), sorted(want))
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)
        other = _env("mlp/s0", XferSet.default(), self.cost)
        with self.assertRaisesRegex(ValueError, "rule set"):
            policy.load_numpy_policy(self.dir, other)

    def test_refuses_a_folder_without_arrays_or_of_another_format(self):
        with self.assertRaisesRegex(ValueError, "policy.npz"):
            policy.load_numpy_policy(self.dir, None)
        np.savez(os.path.join(self.dir, runtime.ARRAYS_FILE), format=np.int32(99))
        with self.assertRaisesRegex(ValueError, "format"):
            runtime.load_arrays(self.dir)
        # Format 1 from before the option: no relative_location_cost array.
        np.savez(os.path.join(self.dir, runtime.ARRAYS_FILE), format=np.int32(1),
                 message_passing_steps=np.int32(1))
        with self.assertRaisesRegex(ValueError, r"policy.npz: a policy of format 1 of an older "
                                    r"layout \(no 'relative_location_cost'\); .* save the "
                                    r"policy again"):
            runtime.load_arrays(self.dir)


class WithoutTensorFlowTest(absltest.TestCase):

    def test_optimize_with_the_shipped_policy_imports_no_tensorflow(self):
        folder = tempfile.mkdtemp(prefix="xflowrl-runtime-test-")
        self.addCleanup(shutil.rmtree, folder, True)
        script = f"""
import os, sys
from xflowrl import cli, zoo
from xflowrl.onnx_io import save_onnx
from xflowrl.entry_points import zoo_weights
graph = zoo.get_graph("small_cnn")
path = os.path.join({folder!r}, "cnn.onnx")
save_onnx(graph, zoo_weights("small_cnn", graph, 0), path)
code = cli.main(["optimize", path, "-o", os.path.join({folder!r}, "out.onnx"),
                 "--method=policy", "--cost_model=analytic/v100", "--no_timing", "--quiet"])
loaded = sorted(m for m in ("tensorflow", "sonnet", "graph_nets") if m in sys.modules)
print("exit", code, "loaded", loaded)
"""
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=300, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("exit 0 loaded []", out.stdout, out.stderr)
        self.assertTrue(os.path.exists(os.path.join(folder, "out.onnx")))


if __name__ == "__main__":
    absltest.main()
