"""Every rewrite the engine performs preserves what the graph computes.

For every shipped xfer (built-ins, the generated rules of the default set,
TASO's collection and the primitive steps of primitive.json), its source
pattern is instantiated as a small graph with concrete shapes, and every
location of every xfer on that graph is applied; small networks with the
structures of the zoo (conv/BN/ReLU blocks, sibling convs, grouped convs,
attention) are checked the same way, and so is every location of every xfer
on a small variant of each zoo graph that has size arguments (`zoo.REDUCED`:
the same blocks, cells and op kinds, fewer layers/cells/steps and narrower;
the full graphs are too big for the float64 reference executor, and the test
checks that every xfer firing on the full graph fires on the small one).
Original and rewritten graph run through the reference executor on the same
random inputs and weights and must agree (rtol 1e-4, float64).
"""

import itertools
from typing import Dict, List, Optional, Tuple

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import Graph, GraphBuilder, XferSet
from xflowrl.executor import reference as executor
from xflowrl.generator import symbolic
from xflowrl.ops import ACTIVATIONS, PADDINGS
from xflowrl.rules import rules_io
from xflowrl.rules.sets import PRIMITIVE_RULES, load_rule_set

RTOL = 1e-4

# Shapes to try for a pattern variable, by how the pattern reads it.
_CONV_INPUT = [(2, 4, 5, 5), (1, 8, 6, 6)]
_CONV_WEIGHT = [(4, 4, 3, 3), (4, 4, 1, 1), (8, 4, 3, 3), (4, 2, 3, 3)]
_VECTOR = [(4,), (8,)]
_SCALE = [(1,)]
_ANY = [(4, 4), (2, 4, 5, 5), (4, 4, 3, 3), (4, 3), (4, 4, 1, 1)]
# Locations are capped at 2x the graph's ops by default; a rule's source
# alone is a tiny graph that an expanding rule may more than double.
_NO_CAP = 1 << 20
_SMALL_KERNEL = [(4, 4, 1, 1), (8, 4, 1, 1)]
_WEIGHT_SLOTS = {("conv2d", 1), ("matmul", 1), ("batchnorm", 1), ("batchnorm", 2),
                 ("batchnorm", 3), ("batchnorm", 4), ("broadcast_add", 1), ("enlarge", 0),
                 ("enlarge", 1), ("scalar_mul", 1)}


def _variable_uses(rule) -> Dict[int, List[Tuple[str, int]]]:
    uses: Dict[int, List[Tuple[str, int]]] = {}
    for op in rule.src:
        for slot, t in enumerate(op.inputs):
            if t.op < 0:
                uses.setdefault(t.op, []).append((op.type, slot))
    return uses


def _menu(uses: List[Tuple[str, int]]):
    kinds = set(uses)
    if ("scalar_mul", 1) in kinds:
        return _SCALE
    if ("enlarge", 0) in kinds:
        return _SMALL_KERNEL
    if ("conv2d", 1) in kinds or ("enlarge", 1) in kinds:
        return _CONV_WEIGHT
    if {("conv2d", 0), ("avgpool", 0), ("maxpool", 0)} & kinds:
        return _CONV_INPUT
    if any(t in ("batchnorm", "broadcast_add") and s > 0 for t, s in kinds):
        return _VECTOR
    return _ANY


def instantiate(rule) -> Optional[Graph]:
    """A small graph made of the rule's source pattern on which it fires."""
    graphs = instantiations(rule, limit=1)
    return graphs[0] if graphs else None


def instantiations(rule, limit: int) -> List[Graph]:
    """Up to `limit` graphs of the rule's source pattern, with different
    variable shapes from fixed menus, on which it fires."""
    uses = _variable_uses(rule)
    variables = sorted(uses, reverse=True)
    bindings = (dict(zip(variables, shapes))
                for shapes in itertools.product(*(_menu(uses[v]) for v in variables)))
    return _firing_graphs(rule, bindings, limit)


def solved_instantiations(rule, limit: int) -> List[Graph]:
    """Up to `limit` graphs of the rule's source pattern at sizes that z3
    solves for (axes of 1..5, `symbolic.shape_bindings`): unlike the menus,
    these reach non-square matrices, unequal concat operands and kernels
    other than 1x1 and 3x3. Empty for rules with ops the model lacks."""
    try:
        solved = symbolic.shape_bindings(rule, count=limit)
    except ValueError:
        return []
    matrix = any(op.type in ("matmul", "transpose") or op.param("numdim") == 2
                 for op in rule.src)
    scales = {v for v, uses in _variable_uses(rule).items() if ("scalar_mul", 1) in uses}
    if matrix:  # the model's [M, N, 1, 1] is a 2-D tensor
        solved = [{v: s[:2] for v, s in b.items()} for b in solved
                  if all(s[2:] == (1, 1) for s in b.values())]
    # ... and its [1, 1, 1, 1] scale the engine's [1]
    solved = [{v: (1,) if v in scales else s for v, s in b.items()} for b in solved]
    return _firing_graphs(rule, solved, limit)


def _firing_graphs(rule, bindings, limit: int) -> List[Graph]:
    alone = XferSet([rule])
    found: List[Graph] = []
    uses = _variable_uses(rule)
    for binding in bindings:
        b = GraphBuilder()
        tensors = {}
        for v, shape in binding.items():
            is_weight = all(u in _WEIGHT_SLOTS for u in uses[v])
            make = b.weight if is_weight else b.input
            tensors[(v, 0)] = make(shape=shape, name=f"var{-v}")
        try:
            for j, op in enumerate(rule.src):
                outs = _build_op(b, op, [tensors[(t.op, t.index)] for t in op.inputs])
                for k, out in enumerate(outs):
                    tensors[(j, k)] = out
            graph = b.build()
        except (ValueError, KeyError):
            continue
        if alone.locations(graph, max_ops=_NO_CAP).counts[0] > 0:
            found.append(graph)
            if len(found) == limit:
                break
    return found


def _build_op(b: GraphBuilder, op, inputs):
    params = dict(op.params)
    padding = PADDINGS[params.get("padding", 0)]
    activation = ACTIVATIONS[params.get("activation", 0)]
    strides = (params.get("stride_h", 1), params.get("stride_w", 1))
    t = op.type
    if t == "conv2d":
        return [b.conv2d(input=inputs[0], weight=inputs[1], strides=strides,
                         padding=padding, activation=activation)]
    if t == "matmul":
        return [b.matmul(a=inputs[0], b=inputs[1], activation=activation)]
    if t in ("add", "mul", "sub", "div"):
        return [getattr(b, t)(x=inputs[0], y=inputs[1])]
    if t == "scalar_mul":
        return [b.scalar_mul(x=inputs[0], scale=inputs[1])]
    if t in ("relu", "sigmoid", "tanh"):
        return [getattr(b, t)(input=inputs[0])]
    if t == "concat":
        return [b.concat(inputs=inputs, axis=params.get("axis", 0))]
    if t == "broadcast_add":
        return [b.broadcast_add(input=inputs[0], bias=inputs[1], activation=activation)]
    if t == "batchnorm":
        return [b.batchnorm(input=inputs[0], scale=inputs[1], bias=inputs[2],
                            mean=inputs[3], var=inputs[4])]
    if t in ("avgpool", "maxpool"):
        return [getattr(b, t + "2d")(input=inputs[0],
                                     kernel=(params["kernel_h"], params["kernel_w"]),
                                     strides=strides, padding=padding, activation=activation)]
    if t == "transpose":
        return [b.transpose(input=inputs[0],
                            perm=[int(d) - 1 for d in str(params["perm"])])]
    if t == "enlarge":
        return [b.enlarge(weight=inputs[0], like=inputs[1])]
    if t == "split":
        axis = params.get("axis", 0)
        n = params.get("num_outputs", 2)
        size = inputs[0].shape[axis]
        return b.split(input=inputs[0], axis=axis,
                       sizes=[size // n] * (n - 1) + [size - size // n * (n - 1)])
    raise ValueError(f"no builder for source op {t}")


def assert_equivalent(test, before: Graph, after: Graph, seed: int, what: str):
    feeds = executor.random_feeds(before, seed=seed)
    # A rewrite may drop weights (never inputs); it may not invent new ones.
    missing = set(after.inputs()) | set(after.weights())
    test.assertTrue(missing <= set(feeds), f"{what}: new leaves {missing - set(feeds)}")
    want = executor.execute(before, feeds)
    got = executor.execute(after, feeds)
    test.assertEqual(len(want), len(got), what)
    for w, g in zip(want, got):
        test.assertEqual(w.shape, g.shape, what)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-8 * np.abs(w).max(),
                                   err_msg=what)


def check_all_locations(test, xfers: XferSet, graph: Graph, seed: int) -> List[str]:
    """Applies every location of every xfer; returns the names that fired."""
    fired = []
    locs = xfers.locations(graph, max_ops=_NO_CAP)
    for x, n in enumerate(locs.counts):
        for loc in range(n):
            assert_equivalent(test, graph, locs.apply(x, loc), seed + loc,
                              f"xfer {xfers.names[x]} at location {loc}")
        if n:
            fired.append(xfers.names[x])
    return fired


def unsound_xfers(test, xfers: XferSet, graph: Graph, seed: int) -> Tuple[set, set]:
    """(xfers with a location, xfers with a location whose rewrite computes
    something else), over every location of every xfer on `graph`."""
    fired, unsound = set(), set()
    locs = xfers.locations(graph, max_ops=_NO_CAP)
    for x, n in enumerate(locs.counts):
        if n:
            fired.add(xfers.names[x])
        for loc in range(n):
            try:
                assert_equivalent(test, graph, locs.apply(x, loc), seed + loc,
                                  f"xfer {xfers.names[x]} at location {loc}")
            except AssertionError:
                unsound.add(xfers.names[x])
    return fired, unsound


def mini_networks() -> Dict[str, Graph]:
    """Small graphs with the structures the zoo graphs expose to the xfers."""
    nets = {}
    # conv -> BN -> ReLU, twice, with a residual add (ResNet block).
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 4, 6, 6))
    h = x
    for i, stride in enumerate((1, 1)):
        h = b.conv2d(input=h, weight=b.weight(name=f"w{i}", shape=(4, 4, 3, 3)),
                     strides=stride)
        h = b.batchnorm(input=h, **{k: b.weight(name=f"bn{i}.{k}", shape=(4,))
                                    for k in ("scale", "bias", "mean", "var")})
        h = b.relu(input=h)
    nets["resnet_block"] = b.build([b.relu(input=b.add(x=h, y=x))])
    # Strided / VALID convs with BN and ReLU (stems, InceptionV3 units).
    for stride, padding in itertools.product((1, 2), ("SAME", "VALID")):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 3, 7, 7))
        h = b.conv2d(input=x, weight=b.weight(name="w", shape=(4, 3, 3, 3)),
                     strides=stride, padding=padding)
        h = b.batchnorm(input=h, epsilon=1e-3, **{
            k: b.weight(name=f"bn.{k}", shape=(4,)) for k in ("scale", "bias", "mean", "var")})
        nets[f"conv_bn_relu_s{stride}_{padding}"] = b.build([b.relu(input=h)])
    # A plain conv -> ReLU, strided and VALID.
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 3, 9, 9))
    h = b.conv2d(input=x, weight=b.weight(name="w", shape=(4, 3, 3, 3)), strides=2,
                 padding="VALID")
    nets["conv_relu"] = b.build([b.relu(input=h)])
    # Sibling 1x1 and 3x3 convs on one input, concatenated (Inception, SqueezeNet).
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 4, 6, 6))
    a = b.conv2d(input=x, weight=b.weight(name="wa", shape=(4, 4, 1, 1)), activation="RELU")
    c = b.conv2d(input=x, weight=b.weight(name="wc", shape=(6, 4, 3, 3)), activation="RELU")
    nets["fire"] = b.build([b.concat(inputs=[a, c], axis=1)])
    # Grouped convs (ResNeXt), strides 1 and 2.
    for stride in (1, 2):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 8, 6, 6))
        h = b.conv2d(input=x, weight=b.weight(name="w", shape=(8, 2, 3, 3)),
                     strides=stride, activation="RELU")
        nets[f"gconv_s{stride}"] = b.build([h])
    # One attention layer (BERT): Q/K/V matmuls sharing an input.
    b = GraphBuilder()
    x = b.input(name="x", shape=(8, 16))
    q, k, v = (b.matmul(a=x, b=b.weight(name=f"w{n}", shape=(16, 16))) for n in "qkv")
    q = b.transpose(input=b.reshape(input=q, shape=(8, 2, 8)), perm=(1, 0, 2))
    k = b.transpose(input=b.reshape(input=k, shape=(8, 2, 8)), perm=(1, 2, 0))
    v = b.transpose(input=b.reshape(input=v, shape=(8, 2, 8)), perm=(1, 0, 2))
    att = b.matmul(a=b.matmul(a=q, b=k), b=v)
    att = b.reshape(input=b.transpose(input=att, perm=(1, 0, 2)), shape=(8, 16))
    out = b.relu(input=b.matmul(a=att, b=b.weight(name="wo", shape=(16, 16))))
    nets["attention"] = b.build([b.add(x=out, y=x)])
    return nets


class SemanticsTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Every shipped rule file: built-ins, generated, TASO's, primitive.
        cls.xfers = XferSet(load_rule_set("default") + load_rule_set("taso")
                            + rules_io.load_rules(PRIMITIVE_RULES))

    def test_every_rule_preserves_semantics_where_it_fires(self):
        untestable = []
        for index, rule in enumerate(self.xfers.rules):
            # Several shape combinations: a rule generated on 4x4 tensors
            # must hold on the other shapes it matches too.
            graphs = instantiations(rule, limit=3) + solved_instantiations(rule, limit=2)
            if not graphs:
                untestable.append(rule.name)
                continue
            for k, graph in enumerate(graphs):
                with self.subTest(rule=rule.name, instance=k):
                    # The rule alone (another xfer may produce the same graph
                    # first and take it as a duplicate), then the whole set.
                    fired = check_all_locations(self, XferSet([rule]), graph, seed=index)
                    self.assertEqual(fired, [rule.name])
                    if k == 0:
                        check_all_locations(self, self.xfers, graph, seed=index)
        # Rules whose source pattern cannot be built as a graph of our ops
        # (none expected): listed so that a regression names them.
        self.assertEqual(untestable, [])

    def test_mini_networks_every_location(self):
        fired = set()
        for name, graph in mini_networks().items():
            with self.subTest(network=name):
                fired.update(check_all_locations(self, self.xfers, graph, seed=7))
        # Every kind of built-in fires on these networks.
        for prefix in ("conv_relu", "conv_bn", "enlarge_merge", "merge_gconv"):
            self.assertTrue(any(n.startswith(prefix) for n in fired),
                            f"no {prefix}* xfer fired; fired: {sorted(fired)}")

    def test_zoo_graphs_every_location(self):
        # Small variants of the zoo graphs (zoo.REDUCED): every xfer that
        # fires on the full graph fires on the small one, and every location
        # of every xfer keeps what it computes.
        for name, kwargs in zoo.REDUCED.items():
            with self.subTest(graph=name):
                full = self.xfers.locations(zoo.get_graph(name))
                on_full = {self.xfers.names[x] for x, n in enumerate(full.counts) if n}
                fired, unsound = unsound_xfers(self, self.xfers,
                                               zoo.get_graph(name, **kwargs), seed=11)
                self.assertTrue(on_full, "no xfer fires on the full graph")
                self.assertLessEqual(on_full, fired, "xfers the small variant misses")
                self.assertEqual(unsound, set())

    def test_enlarge_merge_never_fires_on_grouped_convs(self):
        # Regression: the enlarge-merge built-ins stacked two sibling convs'
        # weights on the output channels even when the convs were grouped
        # (NasNet-A's depthwise halves of its separable convs), which
        # regroups the outputs so that each merged group reads the wrong
        # input channels. They now require `group: 1`; grouped siblings are
        # left alone and ungrouped ones still merge, soundly.
        for activation in ("NONE", "RELU"):
            for in_per_group, expect_merge in ((1, False), (2, False), (8, True)):
                b = GraphBuilder()
                x = b.input(name="x", shape=(1, 8, 6, 6))
                convs = [b.conv2d(input=x, weight=b.weight(name=f"w{i}",
                                                           shape=(8, in_per_group, 3, 3)),
                                  activation=activation) for i in range(2)]
                fired, unsound = unsound_xfers(
                    self, self.xfers, b.build([b.add(x=convs[0], y=convs[1])]), seed=5)
                merge = f"enlarge_merge_convs_s1_same_{activation.lower()}"
                self.assertEqual(merge in fired, expect_merge, (activation, in_per_group))
                self.assertEqual(unsound, set())

    def test_random_rewrite_sequences(self):
        # Rewrites compose: every graph along a random walk of xfers still
        # computes what the original network computes.
        rng = np.random.default_rng(0)
        for name, original in mini_networks().items():
            graph = original
            for step in range(4):
                locs = self.xfers.locations(graph)
                valid = [(x, l) for x, n in enumerate(locs.counts) for l in range(n)]
                if not valid:
                    break
                x, l = valid[rng.integers(len(valid))]
                graph = locs.apply(x, l)
                assert_equivalent(self, original, graph, seed=step,
                                  what=f"{name} step {step}: {self.xfers.names[x]}")

    def test_a_wrong_rewrite_is_caught(self):
        # Guard against a check that cannot fail: a graph that differs from
        # the original only by one activation must be reported.
        b = GraphBuilder()
        x = b.input(name="x", shape=(2, 4))
        w = b.weight(name="w", shape=(4, 4))
        before = b.build([b.matmul(a=x, b=w)])
        b2 = GraphBuilder()
        x2 = b2.input(name="x", shape=(2, 4))
        after = b2.build([b2.matmul(a=x2, b=b2.weight(name="w", shape=(4, 4)),
                                    activation="RELU")])
        with self.assertRaises(AssertionError):
            assert_equivalent(self, before, after, seed=0, what="planted")


if __name__ == "__main__":
    absltest.main()
