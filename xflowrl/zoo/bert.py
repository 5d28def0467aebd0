"""BERT as TASO's corrected example (cpp_examples/bert.h in
github.com/jiazhihao/TASO).

Sequence 64, hidden 1024, 16 heads, 8 layers by default. Per layer: Q/K/V
matmuls on the layer input, heads split by reshape + transpose, attention as
two batched matmuls (no softmax, as in TASO's example), heads merged, an
output projection with ReLU and a residual add: 15 ops a layer (6 matmuls,
4 reshapes, 4 transposes, 1 add) plus the input ReLU, so 121 ops and 48
matmuls at 8 layers; analytic cpu cost 74.51 ms.
"""

from xflowrl.engine.graph import Graph, GraphBuilder
from xflowrl.zoo.common import attention


def bert(seq_len: int = 64, hidden: int = 1024, heads: int = 16, layers: int = 8) -> Graph:
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not divisible by heads {heads}")
    b = GraphBuilder()
    x = b.relu(input=b.input(name="data", shape=(seq_len, hidden)))
    for layer in range(layers):
        x = attention(b, x, heads, f"layer{layer}", out_activation="RELU")
    return b.build([x])
