"""The learner's fast paths against straightforward references: the graph
encoder's rounds against graph_nets' `GraphNetwork` (`GraphEncoder.reference`),
the location head scoring only valid locations against scoring all of them,
and a whole PPO update (X-RLflow preset: epochs of minibatches, clipping,
entropy, gradient clip) against the same update computed the reference way."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from xflowrl import zoo
from xflowrl.agents.ppo import PPOAgent, PPOConfig, learning
from xflowrl.embedding import features
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv

_XFERS = XferSet.default()
_CONFIG = PPOConfig.xrlflow()


def _env(graph="small_cnn", max_steps=6):
    return GraphEnv(zoo.get_graph(graph), _XFERS, CostModel("analytic"),
                    EnvConfig(max_steps=max_steps))


def _episodes(agent, envs):
    """Whole episodes of `agent` in `envs` (its buffer, then emptied)."""
    agent.run_episodes(envs)
    steps, agent._buffer = agent._buffer, []  # pylint: disable=protected-access
    return steps


def _as_reference(agent):
    """Makes `agent`'s network compute the reference way: graph_nets' core
    rounds and every location scored (the mask ignored)."""
    net = agent.network
    location_head = net.location_head
    net.encode = net.encoder.reference
    net.location_head = (lambda embedding, xfer, nodes=None, cost_delta=None,
                         num_locations=None, location_mask=None:
                         location_head(embedding, xfer, nodes, cost_delta, num_locations))
    return agent


class LearningTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        envs = [_env(), _env("small_cnn")]
        collector = PPOAgent(len(_XFERS), _CONFIG, seed=5)
        cls.steps = []
        for _ in range(50):  # more than a minibatch, and locations to choose from
            cls.steps += _episodes(collector, envs)
            if len(cls.steps) > 20 and any(s.location_mask.sum() > 1 for s in cls.steps):
                break
        cls.env = envs[0]

    def _agents(self):
        fast = PPOAgent(len(_XFERS), _CONFIG, seed=0)
        reference = _as_reference(PPOAgent(len(_XFERS), _CONFIG, seed=0))
        for agent in (fast, reference):
            agent.build(self.env)
        for a, b in zip(fast.network.variables, reference.network.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        return fast, reference

    def test_the_encoder_and_its_gradients_match_graph_nets(self):
        agent = PPOAgent(len(_XFERS), _CONFIG, seed=0)
        encoder = agent.network.encoder
        graph = features.to_tensors(features.batch([s.state for s in self.steps[:7]]))
        with tf.GradientTape(persistent=True) as tape:
            fast, reference = encoder(graph), encoder.reference(graph)
            losses = [tf.reduce_sum(tf.sin(e.nodes)) + tf.reduce_sum(tf.cos(e.globals))
                      for e in (fast, reference)]
        for a, b in zip(fast, reference):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
        variables = encoder.trainable_variables
        for a, b in zip(*(tape.gradient(loss, variables) for loss in losses)):
            # Float32 sums in another order: differences relative to the largest entry.
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4,
                                       atol=1e-5 * np.abs(b.numpy()).max())

    def test_scoring_valid_locations_only_keeps_their_logits(self):
        agent = PPOAgent(len(_XFERS), _CONFIG, seed=0)
        net = agent.network
        steps = self.steps[:8]
        batch = learning.make_batch(steps, learning.compute_advantages(steps, _CONFIG),
                                    net.num_xfers)
        embedding = net.encode(batch.state)
        args = (embedding, batch.xfer, batch.location_nodes, batch.cost_delta)
        sparse = net.location_head(*args, None, batch.location_mask)
        dense = net.location_head(*args)
        mask = batch.location_mask.numpy()
        self.assertGreater(mask.sum(), 1)
        np.testing.assert_allclose(sparse.logits.numpy()[mask], dense.logits.numpy()[mask],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(sparse.value.numpy(), dense.value.numpy())

    def test_one_update_matches_the_reference(self):
        fast, reference = self._agents()
        batch = learning.make_batch(self.steps, learning.compute_advantages(self.steps, _CONFIG),
                                    fast.network.num_xfers)
        grads = []
        for agent in (fast, reference):
            variables = agent.network.trainable_variables
            with tf.GradientTape() as tape:
                metrics = agent.learner._losses(batch)  # pylint: disable=protected-access
            grads.append((metrics, tape.gradient(metrics["loss"], variables)))
        (m_fast, g_fast), (m_ref, g_ref) = grads
        for k in m_ref:
            np.testing.assert_allclose(m_fast[k].numpy(), m_ref[k].numpy(), rtol=1e-4,
                                       atol=1e-6, err_msg=k)
        for v, a, b in zip(fast.network.trainable_variables, g_fast, g_ref):
            np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                       tf.convert_to_tensor(b).numpy(), rtol=1e-3, atol=1e-5,
                                       err_msg=v.name)

        # A whole update: 4 epochs of minibatches of 16, the same order (the
        # learners' generators are seeded alike).
        before = [v.numpy().copy() for v in fast.network.trainable_variables]
        metrics = [agent.learner.update(self.steps) for agent in (fast, reference)]
        self.assertTrue(all(not np.array_equal(a, v.numpy())
                            for a, v in zip(before, fast.network.trainable_variables)))
        for k in metrics[1]:
            np.testing.assert_allclose(metrics[0][k], metrics[1][k], rtol=1e-3, atol=1e-5,
                                       err_msg=k)
        for a, b in zip(fast.network.trainable_variables, reference.network.trainable_variables):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=2e-5,
                                       err_msg=a.name)
            self.assertEqual(a.name, b.name)


if __name__ == "__main__":
    absltest.main()
