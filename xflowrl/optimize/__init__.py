"""Optimising a user's own ONNX model: read it with its weights, rewrite it,
check that it computes the same and runs faster, write it back.

The library behind the `xflowrl` command (`xflowrl/cli.py`; docs/cli.md):

    from xflowrl.optimize import OptimizeOptions, optimize_file
    report = optimize_file(OptimizeOptions("model.onnx", "out.onnx", method="greedy"))
    print(report.table())

`model_io` reads and writes model files (the model's own weights, interface,
metadata and external data; atomic writes), `methods` rewrites a graph
(greedy, TASO's search, the learned agents, a trained policy), `handover`
hands over what a learned agent found (train, select the best round, the
cheapest graph of its episodes: the entry points' path too), `verify`
compares outputs and times models, `pipeline` puts them together and
`inspection` describes a model and times models side by side.
"""

from xflowrl.optimize.model_io import BadInput, UserModel, load_model, parse_input_shapes
from xflowrl.optimize.pipeline import OptimizeOptions, OptimizeReport, Refused, optimize_file
