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

Measured TensorFlow times and memory: `experiments/graph_properties.py`.
"""

from typing import Callable, Dict

from xflowrl.graphs.graph import Graph
from xflowrl.graphs.zoo.bert import bert
from xflowrl.graphs.zoo.inception import inception_v3
from xflowrl.graphs.zoo.nasnet import nasnet_a
from xflowrl.graphs.zoo.nasrnn import nasrnn
from xflowrl.graphs.zoo.resnet import resnet18, resnet50, resnet50_taso
from xflowrl.graphs.zoo.resnext import resnext50
from xflowrl.graphs.zoo.squeezenet import squeezenet1_1
from xflowrl.graphs.zoo.toy import small_cnn
from xflowrl.graphs.zoo.vgg import vgg19
from xflowrl.graphs.zoo.vit import vit

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


def get_graph(name: str, **kwargs) -> Graph:
    """Builds the zoo graph `name`; keyword arguments go to its builder.

    Raises:
      ValueError: unknown name.
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown graph {name!r}; choose from {list(GRAPHS)}")
    return _BUILDERS[name](**kwargs)
