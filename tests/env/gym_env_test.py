"""The gymnasium wrapper passes gymnasium's own environment checker."""

from absl.testing import absltest
from gymnasium.utils import env_checker
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.gym_env import GymGraphEnv


class GymEnvTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.env = GymGraphEnv(GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(),
                                        CostModel("analytic"),
                                        EnvConfig(max_steps=3, invalid_action="ignore")))

    def test_env_checker(self):
        env_checker.check_env(self.env, skip_render_check=True)

    def test_truncation_by_step_limit(self):
        obs, _ = self.env.reset(seed=0)
        self.assertIn(obs, self.env.observation_space)
        for step in range(3):
            x = int(np.flatnonzero(obs["xfer_mask"][:-1])[0])
            obs, _, terminated, truncated, _ = self.env.step((x, 0))
        self.assertFalse(terminated)
        self.assertTrue(truncated)


if __name__ == "__main__":
    absltest.main()
