"""Tests of the PPO networks, learner and training loop."""

import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest, parameterized
import numpy as np
import onnx
import tensorflow as tf

from tests import entry_point
from xflowrl import zoo
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.training import Progress, TrainConfig, replay, train
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.embedding import features
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, run_episode
from xflowrl.env.replay import cheapest_prefix
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.executor.weights import random_weights
from xflowrl.onnx_io import load_onnx, to_onnx

_XFERS = XferSet.default()
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class _RecordingEnv(SampledGraphEnv):
    """A `SampledGraphEnv` that keeps every step's graph and action."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.actions = []

    def step(self, action):
        self.actions.append((self.current, *(int(a) for a in action)))
        return super().step(action)


def _checkpointed(agent):
    """(name, value) of every variable an agent's checkpoint holds."""
    variables = (agent.network.variables + agent.learner.policy_optimizer.variables
                 + agent.learner.value_optimizer.variables + (agent.episodes, agent.updates))
    return [(v.name, v.numpy()) for v in variables]


def _env(max_steps=6):
    return GraphEnv(zoo.get_graph("small_cnn"), _XFERS, CostModel("analytic"),
                    EnvConfig(max_steps=max_steps))


class NetworkTest(parameterized.TestCase):

    @parameterized.parameters(False, True)
    def test_permuting_candidates_permutes_location_logits(self, relative):
        env = _env()
        obs = env.reset()
        agent = PPOAgent(len(_XFERS), PPOConfig(relative_location_cost=relative), seed=0)
        net = agent.network
        x = int(np.argmax(obs.location_mask.sum(axis=1)))  # the xfer with most locations
        count = int(obs.location_mask[x].sum())
        self.assertGreater(count, 2)
        embedding = net.encode(features.to_tensors(obs.state))
        nodes = obs.locations.nodes_of(x)[:count]
        delta = obs.locations.cost_delta_of(x)[:count]
        perm = np.random.default_rng(0).permutation(count)
        a = net.location_head(embedding, tf.constant([x]), tf.constant(nodes[None]),
                              tf.constant(delta[None])).logits.numpy()[0]
        b = net.location_head(embedding, tf.constant([x]), tf.constant(nodes[perm][None]),
                              tf.constant(delta[perm][None])).logits.numpy()[0]
        np.testing.assert_allclose(b, a[perm], rtol=1e-5)
        self.assertGreater(np.ptp(a), 0)  # and the candidates are told apart
        # With the option the scorer reads one column more: the relative cost.
        first, = [v for v in net._location_scorer.trainable_variables  # pylint: disable=protected-access
                  if v.name.endswith("linear_0/w:0")]
        width = first.shape[0]
        self.assertEqual(width, 32 + 1 + relative + 32 + 16)

    @parameterized.parameters(False, True)
    def test_a_training_step_changes_every_variable_group(self, relative):
        env = _env()
        agent = PPOAgent(len(_XFERS), PPOConfig(episodes_per_update=2,
                                                relative_location_cost=relative), seed=0)
        for _ in range(2):
            agent.run_episode(env)
        before = {v.name: v.numpy().copy() for v in agent.network.trainable_variables}
        agent.update()
        after = {v.name: v.numpy() for v in agent.network.trainable_variables}
        changed = {n for n in before if not np.array_equal(before[n], after[n])}
        for scope in ("graph_encoder", "xfer_torso", "xfer_scorer", "xfer_value",
                      "location_scorer", "location_value"):
            self.assertTrue(any(scope in n for n in changed), f"{scope} did not change")


class SeedTest(absltest.TestCase):

    def test_the_seed_alone_fixes_the_weights_and_global_random_state_is_untouched(self):
        env = _env(max_steps=2)

        def built(seed):
            agent = PPOAgent(len(_XFERS), PPOConfig(), seed=seed)
            agent.build(env)
            return agent

        tf.random.set_seed(7)
        expected = tf.random.uniform([4]).numpy()
        tf.random.set_seed(7)
        first = built(0)
        # Building an agent neither reseeds nor draws from TensorFlow's
        # global random state ...
        np.testing.assert_array_equal(tf.random.uniform([4]).numpy(), expected)
        # ... nor depends on it: the same seed gives the same weights.
        second = built(0)
        other = built(1)
        names = [v.name for v in first.network.variables]
        self.assertNotEmpty(names)
        for a, b, c in zip(first.network.variables, second.network.variables,
                           other.network.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
        self.assertTrue(any(not np.array_equal(a.numpy(), c.numpy())
                            for a, c in zip(first.network.variables, other.network.variables)))

    def test_build_changes_nothing(self):
        # `build` creates the optimizers' moments (for checkpoint restores);
        # an update after it equals an update without it.
        env = _env(max_steps=2)
        config = PPOConfig(episodes_per_update=2)
        agents = [PPOAgent(len(_XFERS), config, seed=4) for _ in range(2)]
        agents[0].build(env)
        before = [v.numpy().copy() for v in agents[0].network.variables]
        optimizer = agents[0].learner.policy_optimizer
        self.assertNotEmpty(optimizer.m)
        self.assertEqual(int(optimizer.step.numpy()), 0)
        self.assertTrue(all(not m.numpy().any() for m in optimizer.m + optimizer.v))
        for agent in agents:
            for _ in range(2):
                agent.run_episode(env)
            agent.update()
        built, plain = (a.network.variables for a in agents)
        self.assertTrue(any(not np.array_equal(b, v.numpy()) for b, v in zip(before, built)))
        for a, b in zip(built, plain):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=a.name)


class TransitionsTest(absltest.TestCase):

    def test_noop_location_value_is_zero_and_cut_episodes_bootstrap(self):
        env = _env(max_steps=2)
        agent = PPOAgent(len(_XFERS), PPOConfig(), seed=3)
        seen_noop = seen_cut = False
        for _ in range(30):
            agent.run_episode(env)
            steps = agent._buffer  # pylint: disable=protected-access
            last = steps[-1]
            if last.xfer == env.noop:
                seen_noop = True
                self.assertEqual(last.location_value, 0.0)
                self.assertEqual(last.location_log_prob, 0.0)
                self.assertEqual(last.bootstrap_value, 0.0)
            elif len(steps) >= 2 and not steps[-2].done:  # two steps: cut by the limit
                seen_cut = True
                final = replay(env, [(_XFERS.names[s.xfer], s.location) for s in steps[-2:]])
                obs = env._observation  # pylint: disable=protected-access
                self.assertEqual(env.graph.hash(), final.hash())
                self.assertAlmostEqual(last.bootstrap_value, agent.actor.value(obs), places=5)
                self.assertNotEqual(last.bootstrap_value, 0.0)
            if seen_noop and seen_cut:
                break
            agent._buffer = []  # pylint: disable=protected-access
        self.assertTrue(seen_noop and seen_cut)


class BatchedActingTest(absltest.TestCase):

    def test_a_batch_acts_as_its_members_do_alone(self):
        # Greedy actions, log-probabilities and values of observations acted
        # on together equal those of each alone (node indices offset right).
        envs = [_env(max_steps=6) for _ in range(3)]
        agent = PPOAgent(len(_XFERS), PPOConfig(), seed=5)
        observations = [env.reset() for env in envs]
        # Different graphs: advance two environments by different steps.
        for k, env in enumerate(envs[1:], start=1):
            for _ in range(k):
                a = agent.actor.act(env._observation)  # pylint: disable=protected-access
                obs, _, done, _ = env.step((a.xfer, a.location))
                self.assertFalse(done)
                observations[k] = obs
        together = agent.actor.act_graphs(observations, greedy=True)
        for obs, action in zip(observations, together):
            alone = agent.actor.act(obs, greedy=True)
            self.assertEqual((alone.xfer, alone.location), (action.xfer, action.location))
            np.testing.assert_allclose(alone[2:], action[2:], rtol=1e-4, atol=1e-5)
        self.assertEqual(agent.actor.tracing_counts["policy_step"], 1)  # any batch, one trace

    def test_parallel_episodes_are_whole_and_in_order(self):
        envs = [_env(max_steps=4) for _ in range(3)]
        agent = PPOAgent(len(_XFERS), PPOConfig(episodes_per_update=3), seed=2)
        episodes = agent.run_episodes(envs)
        self.assertEqual(agent.buffered_episodes, 3)
        buffer = agent._buffer  # pylint: disable=protected-access
        ends = [i for i, s in enumerate(buffer) if s.done]
        self.assertEqual([e.steps for e in episodes], list(np.diff([-1] + ends)))
        # Each episode's substitutions replay to its final cost, and its
        # cheapest prefix to its lowest cost.
        for env, episode in zip(envs, episodes):
            graph = replay(env, episode.applied)
            self.assertAlmostEqual(graph.cost(env.cost_model), episode.final_cost)
            self.assertAlmostEqual(cheapest_prefix(env, episode.applied)[0],
                                   episode.cheapest_cost)
        agent.update()
        self.assertEqual(agent.buffered_episodes, 0)


class LowestCostTest(absltest.TestCase):

    def test_any_policys_episode_records_its_cheapest_graph(self):
        for seed in range(4):
            env = _env(max_steps=8)
            episode = run_episode(env, RandomAgent(seed=seed).act)
            cost, prefix = cheapest_prefix(env, episode.applied)
            self.assertAlmostEqual(cost, episode.cheapest_cost)
            self.assertLessEqual(episode.cheapest_cost, min(episode.initial_cost,
                                                          episode.final_cost))
            if len(prefix) < len(episode.applied):  # it passed through a cheaper graph
                self.assertLess(episode.cheapest_cost, episode.final_cost)


class TrainingTest(absltest.TestCase):

    def test_parallel_envs_keep_the_episodes_per_update(self):
        env = _env(max_steps=4)
        agent = PPOAgent(len(_XFERS), PPOConfig(episodes_per_update=3), seed=1)
        result = train(env, agent, TrainConfig(episodes=7, parallel_envs=2),
                       tempfile.mkdtemp(), progress=lambda s: None)
        self.assertEqual(result.episodes, 7)
        self.assertEqual([row["episode"] for row in result.history], [3, 6, 7])
        # The cheapest graph passed through is never above the cheapest final one.
        self.assertLessEqual(result.cheapest_cost, result.best_final_cost)
        self.assertLessEqual(result.cheapest_cost, env.initial_cost)
        self.assertEqual(result.history[-1]["cheapest_cost"], result.cheapest_cost)
        with self.assertRaises(ValueError):
            TrainConfig(parallel_envs=0)

    def test_training_calls_take_the_traced_fast_path(self):
        # Two graphs of different sizes and minibatches of random states:
        # batch, node, edge and candidate-row counts change from call to
        # call, and none of that may send a call through tf.function's own
        # (slow) call again after each function's first trace.
        env = SampledGraphEnv({"small": zoo.get_graph("small_cnn"),
                               "wide": zoo.get_graph("small_cnn", width=48)}, _XFERS,
                              CostModel("analytic"), EnvConfig(max_steps=4), seed=5)
        config = PPOConfig(episodes_per_update=3, epochs=2, minibatch_size=4)
        agent = PPOAgent(len(_XFERS), config, seed=3)
        # pylint: disable=protected-access
        traced = {"act": agent.actor._policy_step, "learn": agent.learner._step}
        calls = dict.fromkeys(traced, 0)

        def counting(name):
            def call(*args):
                calls[name] += 1
                return traced[name](*args)
            return call
        agent.actor._policy_step = counting("act")
        agent.learner._step = counting("learn")
        train(env, agent, TrainConfig(episodes=9, parallel_envs=2), tempfile.mkdtemp(),
              progress=lambda s: None)
        self.assertGreaterEqual(calls["act"], 10)
        self.assertGreaterEqual(calls["learn"], 6)
        self.assertEqual(traced["act"].slow_calls, 1)
        self.assertEqual(traced["learn"].slow_calls, 1)

    def test_a_resumed_run_repeats_the_uninterrupted_run(self):
        self.maxDiff = None
        # Minibatches in two epochs: the learner's generator is drawn from too.
        config = PPOConfig(episodes_per_update=2, epochs=2, minibatch_size=3)

        def make_env():
            return _RecordingEnv({"small": zoo.get_graph("small_cnn"),
                                  "wide": zoo.get_graph("small_cnn", width=48)}, _XFERS,
                                 CostModel("analytic"), EnvConfig(max_steps=4), seed=5)

        def run(episodes, logdir, killed_after=None, killed_dir=None):
            """A run; with `killed_after`, its logdir is copied to `killed_dir`
            right after that episode's progress line, as killing the run
            there would leave it (the checkpoint and progress file are
            written before the line); returns the actions taken until then."""
            # Episodes on two graphs drawn at random: the environment's
            # generator is drawn from too.
            env = make_env()
            agent = PPOAgent(len(_XFERS), config, seed=3)
            killed = []

            def progress(line):
                if killed_after is not None and line.startswith(f"episode {killed_after}/"):
                    shutil.copytree(logdir, killed_dir)
                    killed.append(len(env.actions))
            result = train(env, agent, TrainConfig(episodes=episodes, checkpoint_every=1,
                                                   eval_every=2), logdir, progress=progress)
            return agent, result, env.actions, killed

        # The uninterrupted run, killed (a copy of its logdir) after episode 4.
        interrupted = os.path.join(tempfile.mkdtemp(), "killed")
        whole, whole_result, actions, [killed_at] = run(8, tempfile.mkdtemp(), 4, interrupted)
        before = actions[:killed_at]
        resumed, resumed_result, after, _ = run(8, interrupted)  # a fresh agent resumes
        # Every step's (graph, xfer, location), greedy episodes' too.
        self.assertEqual(before + after, actions)
        self.assertEqual({graph for graph, _, _ in actions}, {"small", "wide"})
        self.assertEqual(resumed_result.history, whole_result.history)
        self.assertEqual((resumed_result.best_final_cost, resumed_result.best_sequence,
                          resumed_result.interactions),
                         (whole_result.best_final_cost, whole_result.best_sequence,
                          whole_result.interactions))
        # Network, Adam moments and counters: the same to the bit.
        for got, want in zip(_checkpointed(resumed), _checkpointed(whole), strict=True):
            np.testing.assert_array_equal(got[1], want[1], err_msg=got[0])
        # And the generators stand where the uninterrupted run's do.
        self.assertEqual(resumed.actor.rng.random(), whole.actor.rng.random())
        self.assertEqual(resumed.learner.rng.random(), whole.learner.rng.random())

        # The finished run, given a larger budget, continues where it stopped.
        lines = []
        more = PPOAgent(len(_XFERS), config, seed=3)
        longer = train(make_env(), more, TrainConfig(episodes=10, checkpoint_every=1,
                                                     eval_every=2), interrupted,
                       progress=lines.append)
        self.assertStartsWith(lines[0], "resumed from ")
        self.assertEndsWith(lines[0], " at episode 8")
        self.assertEqual(longer.episodes, 10)
        self.assertEqual(int(more.updates.numpy()), 5)
        self.assertGreaterEqual(longer.interactions, resumed_result.interactions + 2)
        self.assertLessEqual(longer.best_final_cost, resumed_result.best_final_cost)
        self.assertEqual(longer.history[:len(resumed_result.history)], resumed_result.history)

    def test_quick_run_hands_over_better_than_initial_and_random(self):
        results = tempfile.mkdtemp()
        # Of the baselines only the random agent's mean is asserted on (it
        # keeps its 20 episodes); TASO's search and equality saturation run
        # on small budgets. One second of saturation ends at its time limit
        # on small_cnn as two did, and its ILP still solves to optimality:
        # the same path, a second of CPU less.
        proc = entry_point.run(
            [sys.executable, os.path.join(_REPO, "experiments", "train_mf.py"), "--quick",
             f"--results_dir={results}", "--taso_budget=100", "--eqsat_time_limit=1"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("episode 100/100", proc.stderr)
        with open(os.path.join(results, "small_cnn", "train_mf", "result.json")) as f:
            result = json.load(f)
        # What the run hands over beats the input and the random agent. The
        # greedy episode of a policy trained for 100 episodes alone is no such
        # promise: its cost depends on the floating-point order of the
        # training, so on the number of threads (here 3.31 ms with one, 3.38
        # with two, and 3.59, above the input's 3.50, on another machine);
        # the hand-over rule is what makes the run safe to use.
        self.assertLess(result["handed_over_cost_ms"], result["initial_cost_ms"])
        self.assertLess(result["handed_over_cost_ms"], result["random_mean_cost_ms"])
        self.assertEqual(result["episodes"], 100)
        # The graph handed over is the cheapest of the greedy and the best
        # training episode's, saved as valid ONNX: its rewrites, replayed,
        # export to the same nodes. (Reimporting it is no check: ONNX has no
        # fused conv+ReLU, so fusions come back unfused.)
        self.assertLessEqual(result["handed_over_cost_ms"],
                             min(result["agent_cost_ms"], result["best_training_cost_ms"]))
        model = onnx.load(os.path.join(results, "small_cnn", "train_mf", "graph.onnx"))
        onnx.checker.check_model(model, full_check=True)
        agent_graph = replay(_env(max_steps=50),
                             [tuple(s) for s in result["handed_over_applied"]])
        self.assertAlmostEqual(agent_graph.cost(CostModel("analytic")),
                               result["handed_over_cost_ms"])
        want = to_onnx(agent_graph, random_weights(zoo.get_graph("small_cnn")))
        self.assertEqual([n.op_type for n in model.graph.node],
                         [n.op_type for n in want.graph.node])
        graph, _ = load_onnx(model)
        self.assertLessEqual(graph.cost(CostModel("analytic")), result["initial_cost_ms"])


class ProgressTest(absltest.TestCase):

    def test_a_progress_file_round_trips(self):
        path = os.path.join(tempfile.mkdtemp(), "progress.json")
        progress = Progress(best_final_cost=2.5, best_sequence=[("a", 1)], interactions=7,
                            cheapest_cost=2.0)
        progress.save(path)
        self.assertEqual(Progress.load(path), progress)

    def test_a_progress_file_of_an_older_layout_is_refused(self):
        path = os.path.join(tempfile.mkdtemp(), "progress.json")
        Progress(best_final_cost=2.5).save(path)
        with open(path) as f:
            older = json.load(f)
        del older["cheapest_cost"]
        with open(path, "w") as f:
            json.dump(older, f)
        with self.assertRaisesRegex(ValueError, f"{path}: a progress file of another layout "
                                                r"\(lacks \['cheapest_cost'\].*run again"):
            Progress.load(path)


if __name__ == "__main__":
    absltest.main()
