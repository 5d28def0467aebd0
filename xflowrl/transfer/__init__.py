"""Policies that transfer across graphs: one model-free policy trained over
a distribution of graphs (`xflowrl.env.sampled.SampledGraphEnv`), evaluated
zero-shot on graphs it never saw (`evaluate`), saved and loaded as a folder
(`policy`), shipped as package data (`policy.SHIPPED`) for `xflowrl optimize
--method=policy`. docs/agents.md, "One policy for many graphs".
"""

from xflowrl.transfer.policy import PolicyInfo, load_policy, read_info, save_policy, shipped_policy
