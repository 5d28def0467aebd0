"""Typed settings of a run: what the shared flags of `experiments/` describe.

An entry point builds one `RunSettings` from its flag values (only
experiments read flags) and asks it for its graph (`source()`: a zoo graph,
or a user's ONNX file with its own weights), the environment and the folder
its results go to: results_dir/<graph>/<entry point>/ (for an ONNX file,
<graph> is the file's stem).
"""

import dataclasses
import os
from typing import Optional

from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import (
    DEFAULT_MAX_LOCATIONS,
    TASO_ALPHA,
    TASO_BUDGET,
)
from xflowrl.entry_points.source import GraphSource, InputShapes, model_source, zoo_source
from xflowrl.env import DEFAULT_MAX_STEPS, EnvConfig, GraphEnv
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.search import Baselines, EQSAT_TIME_LIMIT, run_baselines


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The graph, rules, cost model and episode settings of a run, and where it writes.

    Attributes:
      graph: the graph's name: a zoo graph (`xflowrl.zoo.GRAPHS`), or with
        `onnx` the model file's stem (`source.model_name`); names the
        results folder.
      rules: a named rule set (`xflowrl.rules.sets.RULE_SETS`).
      cost_model: a cost backend (`xflowrl.engine.BACKENDS`).
      profile: device profile of the analytic backend (the fitted backend's
        coefficient file).
      cost_cache: measured backends' cache of op timings (None: no cache;
        "reference": onednn's shipped table, read-only).
      max_steps, max_locations, reward, cost_features: the environment's
        `EnvConfig` fields of the same names.
      results_dir: the root of results folders.
      onnx: a user's ONNX file to optimise instead of a zoo graph (None: the
        zoo graph `graph`).
      input_shapes: with `onnx`, static shapes for its inputs declared with
        dynamic dimensions, as ((name, shape), ...) (`source.input_shapes_key`).
      batch: the zoo graph's batch size (its builder's `batch_size`; 1: the
        zoo's default graph); a batch other than 1 names the results folder
        `<graph>@b<batch>`.
    """
    graph: str
    rules: str = DEFAULT_RULE_SET
    cost_model: str = DEFAULT_BACKEND
    profile: str = DEFAULT_PROFILE
    cost_cache: Optional[str] = None
    max_steps: int = DEFAULT_MAX_STEPS
    max_locations: int = DEFAULT_MAX_LOCATIONS
    reward: str = "relative"
    cost_features: str = "full"
    results_dir: str = "results"
    onnx: Optional[str] = None
    input_shapes: InputShapes = ()
    batch: int = 1

    def source(self) -> GraphSource:
        """The graph to optimise: the model file `onnx` (read once per
        process, with its own weights) or the zoo graph `graph`.

        Raises:
          BadInput (`xflowrl.optimize.model_io`): `onnx` cannot be read or
            imported; the message names the file.
        """
        if self.onnx:
            return model_source(self.onnx, dict(self.input_shapes))
        return zoo_source(self.graph, self.batch)

    def env_config(self) -> EnvConfig:
        """The environment's settings (other `EnvConfig` fields at their defaults)."""
        return EnvConfig(max_steps=self.max_steps, max_locations=self.max_locations,
                         reward=self.reward, cost_features=self.cost_features)

    def make_env(self) -> GraphEnv:
        """The real environment of `source()`'s graph under these rules, cost
        model and config."""
        return GraphEnv(self.source().graph, XferSet.from_name(self.rules),
                        CostModel(self.cost_model, profile=self.profile,
                                  cache_path=self.cost_cache), self.env_config())

    def results_folder(self, entry_point: str) -> str:
        """results_dir/<graph>/<entry_point>: where that entry point writes (not created)."""
        name = self.graph if self.batch == 1 else f"{self.graph}@b{self.batch}"
        return os.path.join(self.results_dir, name, entry_point)


@dataclasses.dataclass(frozen=True)
class BaselineSettings:
    """The baselines a training run reports beside its agent (`run_baselines`).

    Attributes:
      taso_alpha: relaxation of TASO's search.
      taso_budget: graphs the search expands (0: skip it).
      random_episodes: episodes of the random agent (0: skip it).
      eqsat_time_limit: seconds of saturation of equality saturation (0:
        skip it).
    """
    taso_alpha: float = TASO_ALPHA
    taso_budget: int = TASO_BUDGET
    random_episodes: int = 20
    eqsat_time_limit: float = EQSAT_TIME_LIMIT

    def run(self, env: GraphEnv, seed: int) -> Baselines:
        """Greedy, TASO's search, the random agent and equality saturation on
        `env`'s initial graph."""
        return run_baselines(env, self.taso_alpha, self.taso_budget, self.random_episodes, seed,
                             self.eqsat_time_limit)
