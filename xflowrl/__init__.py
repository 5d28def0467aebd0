"""xflowrl: reinforcement learning for computation-graph optimisation.

Subpackages: `engine` (the engine's Python API), `rules` (the rule format),
`executor` (numpy semantics), `onnx_io` (ONNX import/export), `zoo` (the
evaluation graphs), `search` (baselines); docs/layout.md names them all.
"""
