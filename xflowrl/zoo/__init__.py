"""The evaluation graphs of the thesis, built with the graph API.

`get_graph(name)` builds one by name; `GRAPHS` lists the names. Batch 1;
sizes are in each module's docstring and in docs/zoo.md. Ops exclude inputs
and weights; the estimated cost is `graph.cost(CostModel("analytic"))`
(profile cpu) of the graph as built:

| graph | type | input | ops | estimated cost (ms) |
| --- | --- | --- | ---: | ---: |
| inception_v3 | convolutional | 3x299x299 | 313 | 208.03 |
| resnet18 | convolutional | 3x224x224 | 69 | 65.06 |
| resnet50 | convolutional | 3x224x224 | 175 | 157.01 |
| squeezenet1_1 | convolutional | 3x224x224 | 65 | 15.08 |
| bert | transformer | 64x1024 | 121 | 74.51 |
| resnet50_taso | convolutional | 64x56x56 | 84 | 141.75 |
| vit | transformer | 64x3072 (patches) | 115 | 117.12 |
| nasnet_a | convolutional | 3x224x224 | 383 | 551.55 |
| resnext50 | convolutional | 3x224x224 | 86 | 150.80 |
| nasrnn | recurrent | 5 x 1x512 | 230 | 6.82 |
| vgg19 | convolutional | 3x224x224 | 43 | 704.05 |

Greedy and TASO-search results per graph: docs/zoo.md
(`benchmarks/zoo_bench.py`). Measured TensorFlow times and memory:
`experiments/graph_properties.py`.
"""

from typing import Any, Callable, Dict

from xflowrl.engine.graph import Graph
from xflowrl.zoo.bert import bert
from xflowrl.zoo.inception import inception_v3
from xflowrl.zoo.nasnet import nasnet_a
from xflowrl.zoo.nasrnn import nasrnn
from xflowrl.zoo.resnet import resnet18, resnet50, resnet50_taso
from xflowrl.zoo.resnext import resnext50
from xflowrl.zoo.squeezenet import squeezenet1_1
from xflowrl.zoo.toy import small_cnn
from xflowrl.zoo.vgg import vgg19
from xflowrl.zoo.vit import vit

_BUILDERS: Dict[str, Callable[..., Graph]] = {
    "resnet18": resnet18,
    "resnet50": resnet50,
    "resnet50_taso": resnet50_taso,
    "inception_v3": inception_v3,
    "squeezenet1_1": squeezenet1_1,
    "bert": bert,
    "vit": vit,
    "nasnet_a": nasnet_a,
    "resnext50": resnext50,
    "nasrnn": nasrnn,
    "vgg19": vgg19,
    "small_cnn": small_cnn,  # quick runs and tests; not a thesis graph
}
GRAPHS = tuple(_BUILDERS)

# What kind of network each graph is (Table 4.1's "type").
KINDS: Dict[str, str] = {
    **{name: "convolutional" for name in GRAPHS},
    "bert": "transformer", "vit": "transformer", "nasrnn": "recurrent",
}
# The gain of `xflowrl.executor.weights.random_weights` that keeps each graph's
# float32 values finite: the softmax-free transformers (attention is cubic in
# its input) need small weights; the rest take He-normal's sqrt(2).
_WEIGHT_GAINS: Dict[str, float] = {"bert": 0.2, "vit": 0.2}


def kind(name: str) -> str:
    """"convolutional", "transformer" or "recurrent" (ValueError if unknown)."""
    _check(name)
    return KINDS[name]


def weight_gain(name: str) -> float:
    """The `random_weights` gain for zoo graph `name` (see `_WEIGHT_GAINS`)."""
    _check(name)
    return _WEIGHT_GAINS.get(name, 2.0 ** 0.5)


def _check(name: str) -> None:
    if name not in _BUILDERS:
        raise ValueError(f"unknown graph {name!r}; choose from {list(GRAPHS)}")

# Builder arguments for small graphs with the structure of the full ones
# (every op kind, every block kind, every xfer that fires on the full graph
# fires here: tests/rules/semantics_test.py checks it), small enough for the
# float64 reference executor. Graphs absent here have no size arguments.
REDUCED: Dict[str, Dict[str, Any]] = {
    "bert": dict(seq_len=8, hidden=16, heads=2, layers=2),
    "small_cnn": {},
    "vit": dict(patches=8, patch_dim=12, hidden=16, heads=2, layers=2, mlp_dim=32,
                classes=10),
    "nasnet_a": dict(image_size=16, stem_channels=8, width=8, stages=1, normal_cells=2),
    "resnext50": dict(image_size=32, stem_channels=8, groups=4,
                      stages=((8, 1, 1), (16, 2, 2))),
    "nasrnn": dict(hidden=8, steps=2),
    "vgg19": dict(image_size=32, channel_divisor=16, hidden=32, classes=10),
}


def get_graph(name: str, **kwargs) -> Graph:
    """Builds the zoo graph `name`; keyword arguments go to its builder.

    Raises:
      ValueError: unknown name.
    """
    _check(name)
    return _BUILDERS[name](**kwargs)
