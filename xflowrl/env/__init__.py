"""Environments: the shared interface, the real environment (`GraphEnv`) and its rewards."""

from xflowrl.env import rewards
from xflowrl.env.environment import (
    CHEAPER,
    CheapestPrefix,
    DEFAULT_MAX_STEPS,
    EnvConfig,
    GraphEnv,
    NO_STEP_LIMIT,
    XFER_SUMMARY_SIZE,
    make_env,
)
from xflowrl.env.interface import (
    Action,
    ActionSpec,
    Environment,
    Episode,
    LocationFeatures,
    Observation,
    ObservationSpec,
    TimeStep,
    Transition,
    cheapest_cost_so_far,
    location_counts,
    prefix_mask,
    run_episode,
)
