"""The generalist's training environment: the corpus' training split.

`training_env(xfers, cost_model, config, seed)` is the `SampledGraphEnv`
both generalists train in (`experiments/train_generalist.py`, either
agent): every episode draws a family uniformly, then one of its members,
and plays it with a step limit of at least 1.5 x one-step greedy's steps
on that graph (equal budgets).
"""

from __future__ import annotations

from typing import Dict

from xflowrl import corpus
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig
from xflowrl.env.sampled import SampledGraphEnv


def training_env(xfers: XferSet, cost_model: CostModel, config: EnvConfig,
                 seed: int = 0, split: str = "train") -> SampledGraphEnv:
    """The `SampledGraphEnv` over `split`'s graphs, each family equally often
    (the generated families have many more members than the zoo's).

    Raises:
      ValueError: a split holding validation members ("validation", "all"):
        they choose among trained policies and are never trained on.
    """
    specs = corpus.specs(split)
    if any(s.split == "validation" for s in specs):
        raise ValueError(f"split {split!r} holds validation members, which are never "
                         f"trained on (they choose which trained policy ships)")
    per_family: Dict[str, int] = {}
    for s in specs:
        per_family[s.family] = per_family.get(s.family, 0) + 1
    return SampledGraphEnv({s.name: s.build for s in specs}, xfers, cost_model, config,
                           seed=seed, equal_budget=True,
                           weights={s.name: 1.0 / per_family[s.family] for s in specs})
