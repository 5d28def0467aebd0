"""A trained policy, once training is over: saved and loaded as a folder
(`folder`), acting greedily in NumPy without TensorFlow (`runtime`), and
the generalist shipped as package data (`shipped/generalist`, found by
`shipped_policy`) for `xflowrl optimize --method=policy`. docs/agents.md,
"One policy for many graphs".
"""

from xflowrl.policy.folder import (
    POLICY_JSON,
    POLICY_PREFIX,
    PolicyInfo,
    SHIPPED,
    current_commit,
    export_arrays,
    has_arrays,
    load_numpy_policy,
    load_policy,
    read_info,
    save_policy,
    shipped_policy,
)
