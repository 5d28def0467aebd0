"""Shared, cached builders for the world-model tests.

The rule set and the random rollouts are built once per test process
(`functools.lru_cache`), so that several test files run in one pytest process
pay for them once. Models are tiny: the tests check behaviour, not quality.
"""

import dataclasses
import functools
from typing import Tuple

import numpy as np
import tensorflow as tf

from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.world_model import data, latent
from xflowrl.world_model.config import WorldModelConfig
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.seeds import Component, component_seed

# A world model small enough to train in a test.
SMALL_CONFIG = WorldModelConfig(latent_size=8, encoder_message_passing_steps=2, lstm_size=16,
                                mixtures=3, action_embedding_size=4, mask_hidden_size=16,
                                reward_hidden=(8, 8), learning_rate=1e-2,
                                final_learning_rate=1e-3, decay_steps=100)


@functools.lru_cache(maxsize=None)
def xfers() -> XferSet:
    return XferSet.default()


@functools.lru_cache(maxsize=None)
def cost_model() -> CostModel:
    return CostModel("analytic")


def real_env(graph: str = "small_cnn", max_steps: int = 6, **config) -> GraphEnv:
    """A fresh real environment (they share the cached rule set)."""
    return GraphEnv(zoo.get_graph(graph), xfers(), cost_model(),
                    EnvConfig(max_steps=max_steps, **config))


@functools.lru_cache(maxsize=None)
def _rollouts(episodes: int, seed: int, max_steps: int) -> Tuple[data.Rollout, ...]:
    return tuple(data.collect_rollouts(real_env(max_steps=max_steps), episodes,
                                       RandomAgent.thesis_collector(seed)))


def rollouts(episodes: int, seed: int = 0, max_steps: int = 6):
    """Random-agent (thesis collector) rollouts of small_cnn, cached."""
    return list(_rollouts(episodes, seed, max_steps))


def encoder_targets(rollouts_, vocab: data.XferVocabulary) -> latent.EncoderTargets:
    """The latent encoder's targets of every state of the rollouts."""
    states = [s for r in rollouts_ for s in r.states]
    valid = np.zeros((len(states), vocab.size), np.float32)
    counts = np.zeros((len(states), vocab.size), np.float32)
    i = 0
    for r in rollouts_:
        for v in r.valid:
            for real, count in v.items():
                c = vocab.to_compact(real)
                if c >= 0:
                    valid[i, c], counts[i, c] = 1.0, count
            i += 1
    return latent.EncoderTargets(
        np.array([latent.cost_change_percent(s) for s in states], np.float32), valid, counts)


def build_world_model(vocab: data.XferVocabulary, max_locations: int, seed: int = 0,
                      **config) -> Tuple[latent.LatentEncoder, MDNRNN]:
    """An untrained latent encoder and MDN-RNN (variables created)."""
    cfg = dataclasses.replace(SMALL_CONFIG, **config)
    encoder = latent.LatentEncoder(
        cfg.latent_size, vocab.size, cfg.encoder_message_passing_steps,
        seed=component_seed(seed, Component.ENCODER_WEIGHTS))
    model = MDNRNN(cfg, vocab.size, max_locations,
                   seed=component_seed(seed, Component.MODEL_WEIGHTS))
    z = tf.zeros([1, cfg.latent_size])
    encoder.predict(z)
    model.step(z, tf.constant([0]), tf.constant([0]), model.initial_state(1))
    model.masks(z, tf.zeros([1, model.hidden_size]))
    return encoder, model


@functools.lru_cache(maxsize=None)
def untrained_world(max_locations: int = 200):
    """An untrained world model of small_cnn: (vocabulary, encoder, MDN-RNN, z_0)."""
    vocab = data.XferVocabulary.from_rollouts(rollouts(12, seed=0), len(xfers()))
    encoder, model = build_world_model(vocab, max_locations)
    z0 = encoder.encode([real_env().reset().state])[0]
    return vocab, encoder, model, z0


def script_model(model: MDNRNN, valid_logits, count: int, reward: float,
                 done_logit: float, gains=None) -> None:
    """Makes an MDN-RNN's reward, done flag and masks constants.

    The mask decoder's last layer and the reward and done columns of the
    MDN head get zero weights, so that (whatever z and h) the reward is
    `reward`, the done logit `done_logit`, xfer m is valid iff
    `valid_logits[m] > 0` and every valid xfer has `count` locations; the
    reward ensemble's members all predict `reward` too (no disagreement);
    a model that predicts xfer summaries predicts `gains` ([M, 2], the
    (min, mean) cost change of each xfer; default zeros). The mixture over
    z_{t+1} is left as it is.
    """
    for member in model._reward_members:  # pylint: disable=protected-access
        out = member._layers[-1]  # pylint: disable=protected-access
        out.w.assign(tf.zeros_like(out.w))
        out.b.assign(tf.fill(out.b.shape, np.float32(reward)))
    last = model._mask_decoder._layers[-1]  # pylint: disable=protected-access
    last.w.assign(tf.zeros_like(last.w))
    m = model.num_known_xfers
    bias = [np.asarray(valid_logits, np.float32), np.full(m, np.log1p(count), np.float32)]
    if model.xfer_summaries:  # predicted in the reward's units
        scale = float(model.reward_scale.numpy())
        bias.append((np.zeros((m, 2)) if gains is None else np.asarray(gains)).reshape(-1)
                    * scale)
    last.b.assign(np.concatenate(bias).astype(np.float32))
    head = model._head  # pylint: disable=protected-access
    w, b = head.w.numpy(), head.b.numpy()
    w[:, -2:] = 0.0
    b[-2:] = reward, done_logit
    head.w.assign(w)
    head.b.assign(b)


def set_member_rewards(model: MDNRNN, member_rewards) -> None:
    """Makes the reward ensemble's member i predict `member_rewards[i]` / the
    reward scale whatever h_{t+1} (zero last-layer weights, constant biases),
    so that the members disagree by a known standard deviation."""
    members = model._reward_members  # pylint: disable=protected-access
    if len(member_rewards) != len(members):
        raise ValueError(f"{len(member_rewards)} rewards for {len(members)} members")
    for member, value in zip(members, member_rewards):
        out = member._layers[-1]  # pylint: disable=protected-access
        out.w.assign(tf.zeros_like(out.w))
        out.b.assign(tf.fill(out.b.shape, np.float32(value)))


def check_rollout_structure(test, rollout: data.Rollout, max_steps: int) -> None:
    """Asserts (on `test`, a TestCase) a rollout's shapes: T actions in
    [1, max_steps], T+1 states and valid dicts, done only at the end."""
    t = len(rollout.actions)
    test.assertBetween(t, 1, max_steps)
    test.assertLen(rollout.states, t + 1)
    test.assertLen(rollout.valid, t + 1)
    test.assertEqual(rollout.actions.shape, (t, 2))
    test.assertEqual(rollout.rewards.shape, (t,))
    np.testing.assert_array_equal(rollout.dones, [False] * (t - 1) + [True])
