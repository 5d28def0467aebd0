"""BERT as TASO's corrected example (cpp_examples/bert.h; REFERENCE.md §8).

Sequence 64, hidden 1024, 16 heads, 8 layers by default. Per layer: Q/K/V
matmuls on the layer input, heads split by reshape + transpose, attention as
two batched matmuls (no softmax, as in TASO's example), heads merged, an
output projection with ReLU and a residual add: 15 ops a layer (6 matmuls,
4 reshapes, 4 transposes, 1 add) plus the input ReLU, so 121 ops and 48
matmuls at 8 layers; analytic cpu cost 74.51 ms.
"""

from xflowrl.graphs.graph import Graph, GraphBuilder


def bert(seq_len: int = 64, hidden: int = 1024, heads: int = 16, layers: int = 8) -> Graph:
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not divisible by heads {heads}")
    d = hidden // heads
    b = GraphBuilder()
    x = b.relu(input=b.input(name="data", shape=(seq_len, hidden)))
    for layer in range(layers):
        name = f"layer{layer}"

        def project(part):
            w = b.weight(name=f"{name}.{part}", shape=(hidden, hidden))
            return b.reshape(input=b.matmul(a=x, b=w), shape=(seq_len, heads, d))

        q = b.transpose(input=project("query"), perm=(1, 0, 2))   # [H, S, d]
        k = b.transpose(input=project("key"), perm=(1, 2, 0))     # [H, d, S]
        v = b.transpose(input=project("value"), perm=(1, 0, 2))   # [H, S, d]
        scores = b.matmul(a=q, b=k)                               # [H, S, S]
        context = b.matmul(a=scores, b=v)                         # [H, S, d]
        context = b.reshape(input=b.transpose(input=context, perm=(1, 0, 2)),
                            shape=(seq_len, hidden))
        out = b.matmul(a=context, b=b.weight(name=f"{name}.output", shape=(hidden, hidden)),
                       activation="RELU")
        x = b.add(x=out, y=x)
    return b.build([x])
