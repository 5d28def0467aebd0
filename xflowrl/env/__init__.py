"""The real environment (`GraphEnv`) and its rewards."""

from xflowrl.env.environment import (EnvConfig, GraphEnv, LocationFeatures, Observation,
                                     XFER_SUMMARY_SIZE)
from xflowrl.env import rewards
