"""NasRNN as TASO's examples/nasrnn.py builds it (github.com/jiazhihao/TASO).

Hidden size 512, 5 steps. Step t reads its own input x_t (1x512) and the
state h (a 1x512 weight before the first step, as in TASO's example: the
initial state is a learned constant). A cell makes eight combinations
t_i = x.W1_i + h.W2_i (16 matmuls with 512x512 weights, 8 adds) and combines
them with this fixed tree (TASO's, op for op):

    m0 = relu(t0) + sigmoid(t3)        m1 = sigmoid(t1) + tanh(t2)
    m2 = sigmoid(t4) * tanh(t5)        m3 = sigmoid(t6) * relu(t7)
    m4 = sigmoid(m1) + tanh(m2)        m5 = tanh(m0) * tanh(m3)
    m6 = tanh(m4) * tanh(m5)           h' = tanh(m6)

46 ops a cell (16 matmul, 11 add, 4 mul, 2 relu, 5 sigmoid, 8 tanh), 230 ops
at 5 steps; the output is the last state; analytic cpu cost 6.82 ms
(docs/zoo.md, `benchmarks/zoo_bench.py`). Every element-wise op is costed
separately; none is fused into the matmuls.

With an initial state that is a weight, the first cell's eight h.W2 matmuls
read only weights: the engine counts them as folded offline (`weight_side`,
cost 0), as TASO's `preprocess_weights` folds them after its search.
"""

from xflowrl.engine.graph import Graph, GraphBuilder


def _cell(b: GraphBuilder, x, h, hidden: int, name: str):
    def combine(i):
        w1 = b.weight(name=f"{name}.w1_{i}", shape=(x.shape[1], hidden))
        w2 = b.weight(name=f"{name}.w2_{i}", shape=(h.shape[1], hidden))
        return b.add(x=b.matmul(a=x, b=w1), y=b.matmul(a=h, b=w2))

    t = [combine(i) for i in range(8)]
    relu, sigmoid, tanh = (lambda v: b.relu(input=v)), (lambda v: b.sigmoid(input=v)), \
        (lambda v: b.tanh(input=v))
    m0 = b.add(x=relu(t[0]), y=sigmoid(t[3]))
    m1 = b.add(x=sigmoid(t[1]), y=tanh(t[2]))
    m2 = b.mul(x=sigmoid(t[4]), y=tanh(t[5]))
    m3 = b.mul(x=sigmoid(t[6]), y=relu(t[7]))
    m4 = b.add(x=sigmoid(m1), y=tanh(m2))
    m5 = b.mul(x=tanh(m0), y=tanh(m3))
    m6 = b.mul(x=tanh(m4), y=tanh(m5))
    return tanh(m6)


def nasrnn(hidden: int = 512, steps: int = 5, batch_size: int = 1) -> Graph:
    """Builds TASO's NasRNN: `steps` cells of width `hidden`."""
    b = GraphBuilder()
    xs = [b.input(name=f"x{t}", shape=(batch_size, hidden)) for t in range(steps)]
    h = b.weight(name="state", shape=(batch_size, hidden))
    for t, x in enumerate(xs):
        h = _cell(b, x, h, hidden, f"cell{t}")
    return b.build([h])
