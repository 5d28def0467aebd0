"""The model-based agent's seeds: every random draw follows from the agent's seed.

Two kinds of draw, each named by an enum:

- `Component`: the world model's parts whose weights (or dropout masks)
  draw from seeds of their own, once per agent (`component_seed`).
- `Purpose`: what a draw during training is for: a round's collectors,
  minibatch order and graphs, the controller's training batches
  (`purpose_seed`). The seed follows from [agent seed, keys, purpose],
  so that what a round draws depends on where the run stands, not on
  earlier draws: a resumed run repeats the uninterrupted one.

The enums' values are part of every seed they derive: changing one changes
the results of every seeded run.
"""

from __future__ import annotations

import enum

import numpy as np


class Component(enum.IntEnum):
    """The parts of the world model that draw from seeds of their own."""
    ENCODER_WEIGHTS = 0
    MODEL_WEIGHTS = 1
    MODEL_DROPOUT = 2


def component_seed(seed: int, component: Component) -> int:
    """The seed of one `Component` of an agent of `seed`.

    Derived by `np.random.SeedSequence` so that the components' weights are
    independent of one another and of the controller's, which a `PPOAgent`
    draws from `seed` itself.
    """
    return int(np.random.SeedSequence(seed, spawn_key=(int(component),)).generate_state(1)[0])


class Purpose(enum.IntEnum):
    """What a draw of the agent's training is for; the keys named beside
    each are those `purpose_seed` takes with it."""
    # [round]: the round's collector (the random agent's seed, or the
    # generator the controller samples its policy with).
    COLLECTION = 1
    # [round]: the first round's walks to the step limit (vocabulary).
    VOCABULARY_WALK = 2
    # [0]: the random agent of the held-out episodes.
    HELD_OUT = 3
    # [round]: the order of the world model's minibatches.
    MINIBATCHES = 4
    # [round]: the dream of the round's greedy imagined episodes.
    IMAGINED_EVALUATION = 5
    # [controller seed, its episodes so far]: a training batch's real starts.
    DREAM_STARTS = 6
    # [controller seed]: the dream's z_{t+1} sampling while the controller
    # trains (`train_in_dream` keys it further by the episodes so far).
    DREAM_SAMPLES = 7
    # [round]: the graphs a distribution's collected episodes draw.
    COLLECTION_GRAPHS = 8
    # [0]: the graphs of the held-out episodes.
    HELD_OUT_GRAPHS = 9
    # [round]: the graphs of the controller's own real episodes.
    REAL_EPISODE_GRAPHS = 10
    # [round]: the controller's sampling in its own real episodes.
    REAL_EPISODES = 11


def purpose_seed(seed: int, purpose: Purpose, *keys: int) -> int:
    """The seed of a draw for `purpose` of an agent of `seed`, keyed by
    `keys` (`Purpose` names them): [seed, *keys, purpose] through
    `np.random.SeedSequence`."""
    return int(np.random.SeedSequence([seed, *keys, int(purpose)]).generate_state(1)[0])
