"""The primitive steps of primitive.json and the rule sets built with them.

Kernel enlargement on its own and the merge of two sibling convs with equal
kernels replace the compound built-in `enlarge_merge_convs_*`: each rule is
checked numerically on several shapes, the constraints that keep the
enlargement from firing where it would be wrong or loop are checked, and a
fire module shows the detour the steps open (an enlargement that costs more,
then a merge that ends below the start), which one-step greedy cannot take.
"""

import dataclasses

from absl.testing import absltest, parameterized
import numpy as np

from tests.rules.semantics_test import assert_equivalent
from xflowrl.engine import CostModel, Graph, GraphBuilder, XferSet
from xflowrl.rules import rules_io
from xflowrl.rules.sets import PRIMITIVE_RULES, RULE_SETS, load_rule_set

PRIMITIVE_NAMES = [
    "enlarge_conv_s1_same_none_1x1_to_3x3",
    "enlarge_conv_s1_same_none_1x1_to_5x5",
    "enlarge_conv_s1_same_none_3x3_to_5x5",
    "enlarge_conv_s1_same_relu_1x1_to_3x3",
    "enlarge_conv_s1_same_relu_1x1_to_5x5",
    "enlarge_conv_s1_same_relu_3x3_to_5x5",
    "merge_convs_s1_same_none",
    "merge_convs_s1_same_relu",
]


def _rules():
    return {r.name: r for r in rules_io.load_rules(PRIMITIVE_RULES)}


def siblings(x_shape, w1_shape, w2_shape, activation="NONE", strides=(1, 1),
             padding="SAME", activation2=None) -> Graph:
    """Two convs reading one input, both outputs graph outputs."""
    b = GraphBuilder()
    x = b.input(name="x", shape=x_shape)
    convs = [b.conv2d(input=x, weight=b.weight(name=f"w{i}", shape=shape), strides=strides,
                      padding=padding, activation=act)
             for i, (shape, act) in enumerate(((w1_shape, activation),
                                               (w2_shape, activation2 or activation)))]
    return b.build(convs)


def fire(activation="RELU") -> Graph:
    """SqueezeNet's fire8/9 expand: 1x1 and 3x3 convs on one 13x13 input, concatenated."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 64, 13, 13))
    e1 = b.conv2d(input=x, weight=b.weight(name="e1", shape=(64, 64, 1, 1)),
                  activation=activation)
    e3 = b.conv2d(input=x, weight=b.weight(name="e3", shape=(64, 64, 3, 3)),
                  activation=activation)
    return b.build([b.concat(inputs=[e1, e3], axis=1)])


def fired(xfers: XferSet, graph: Graph):
    locs = xfers.locations(graph)
    return {xfers.names[x]: n for x, n in enumerate(locs.counts) if n}


class RuleSetsTest(absltest.TestCase):

    def test_primitive_file(self):
        self.assertEqual(list(_rules()), PRIMITIVE_NAMES)

    def test_set_sizes(self):
        # The sizes docs/rules.md states.
        sizes = {name: len(load_rule_set(name)) for name in RULE_SETS}
        self.assertEqual(sizes, {"default": 1678, "builtin+taso": 144, "builtin": 15,
                                 "generated": 1663, "taso": 129, "tensat": 140,
                                 "primitive": 1679, "tensat_full": 149})

    def test_tensat_is_taso_plus_tensat_extras(self):
        names = [r.name for r in load_rule_set("tensat")]
        taso = [r.name for r in load_rule_set("taso")]
        self.assertEqual(names[:len(taso)], taso)
        self.assertEqual(names[len(taso):],
                         ["merge_gconv_s1_none", "merge_gconv_s1_relu", "merge_gconv_s2_none",
                          "merge_gconv_s2_relu"]
                         + [n for n in PRIMITIVE_NAMES if n != "merge_convs_s1_same_none"])
        # TASO's own merge of two sibling convs without activation stands in
        # for the dropped one: it fires on the same siblings.
        merge = XferSet([r for r in load_rule_set("taso") if r.name == "taso_127"])
        self.assertEqual(fired(merge, siblings((1, 4, 6, 6), (4, 4, 1, 1), (6, 4, 1, 1))),
                         {"taso_127": 2})

    def test_tensat_full_is_tensat_with_the_rest_of_taso_s_hand_written_xfers(self):
        full = {r.name: r for r in load_rule_set("tensat_full")}
        tensat = {r.name: r for r in load_rule_set("tensat")}
        self.assertEqual(sorted(set(full) - set(tensat)),
                         ["bias_add_relu", "conv_bn_s1_same", "conv_bn_s1_valid",
                          "conv_bn_s2_same", "conv_bn_s2_valid", "conv_relu_s1_same",
                          "conv_relu_s1_valid", "conv_relu_s2_same", "conv_relu_s2_valid"])
        self.assertFalse(set(tensat) - set(full))
        self.assertEqual([full[n] for n in tensat], list(tensat.values()))
        self.assertFalse([n for n in full if n.startswith("enlarge_merge_convs_")])

    def test_primitive_is_default_with_steps_for_the_compound(self):
        names = [r.name for r in load_rule_set("primitive")]
        default = [r.name for r in load_rule_set("default")]
        self.assertFalse([n for n in names if n.startswith("enlarge_merge_convs_")])
        # The generated compounds: two sibling convs enlarged and merged in
        # one step (their target introduces an enlarge).
        compounds = [r.name for r in load_rule_set("generated")
                     if any(op.type == "enlarge" for op in r.dst)
                     and not any(op.type == "enlarge" for op in r.src)]
        self.assertLen(compounds, 5)
        self.assertEqual(sorted(names),
                         sorted([n for n in default if not n.startswith("enlarge_merge_convs_")
                                 and n not in compounds] + PRIMITIVE_NAMES))


class PrimitiveRulesTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rules = _rules()
        cls.xfers = XferSet(list(cls.rules.values()))

    @parameterized.named_parameters(
        ("1x1_to_3x3", "enlarge_conv_s1_same_none_1x1_to_3x3", (2, 4, 5, 5), (6, 4, 1, 1),
         (8, 4, 3, 3), "NONE"),
        ("1x1_to_3x3_relu_nonsquare", "enlarge_conv_s1_same_relu_1x1_to_3x3", (1, 3, 7, 5),
         (4, 3, 1, 1), (2, 3, 3, 3), "RELU"),
        ("1x1_to_5x5", "enlarge_conv_s1_same_none_1x1_to_5x5", (1, 4, 6, 6), (4, 4, 1, 1),
         (4, 4, 5, 5), "NONE"),
        ("3x3_to_5x5_relu", "enlarge_conv_s1_same_relu_3x3_to_5x5", (1, 2, 9, 4), (5, 2, 3, 3),
         (3, 2, 5, 5), "RELU"),
        ("merge_1x1", "merge_convs_s1_same_none", (2, 4, 5, 5), (6, 4, 1, 1), (8, 4, 1, 1),
         "NONE"),
        ("merge_3x3_relu", "merge_convs_s1_same_relu", (1, 4, 6, 6), (4, 4, 3, 3),
         (8, 4, 3, 3), "RELU"),
        ("merge_5x5_relu", "merge_convs_s1_same_relu", (1, 3, 7, 7), (2, 3, 5, 5),
         (6, 3, 5, 5), "RELU"),
    )
    def test_preserves_semantics(self, name, x_shape, w1_shape, w2_shape, activation):
        graph = siblings(x_shape, w1_shape, w2_shape, activation)
        alone = XferSet([self.rules[name]])
        locs = alone.locations(graph)
        self.assertGreater(locs.counts[0], 0)
        for loc in range(locs.counts[0]):
            assert_equivalent(self, graph, locs.apply(0, loc), seed=loc,
                              what=f"{name} at location {loc}")

    def test_enlarge_result_then_merge(self):
        graph = siblings((1, 4, 6, 6), (4, 4, 1, 1), (6, 4, 3, 3), "RELU")
        self.assertEqual(fired(self.xfers, graph), {"enlarge_conv_s1_same_relu_1x1_to_3x3": 1})
        enlarged = self.xfers.locations(graph).apply(
            self.xfers.names.index("enlarge_conv_s1_same_relu_1x1_to_3x3"), 0)
        self.assertEqual(enlarged.op_counts()["enlarge"], 1)
        # Now both kernels are 3x3: no further enlargement, only the merge
        # (both orders of the concatenated weights).
        self.assertEqual(fired(self.xfers, enlarged), {"merge_convs_s1_same_relu": 2})
        merge = self.xfers.names.index("merge_convs_s1_same_relu")
        merged = self.xfers.locations(enlarged).apply(merge, 0)
        self.assertEqual(merged.op_counts()["conv2d"], 1)
        assert_equivalent(self, graph, merged, seed=3, what="enlarge then merge")

    def test_enlarging_to_the_same_size_would_loop(self):
        # Without its kernel constraints the enlargement fires on siblings
        # with equal kernels too: each application wraps the weight in one
        # more (no-op) enlarge, a new graph every time, so the engine neither
        # rejects it nor drops it as a duplicate. The shipped rules pin the
        # source kernels to distinct sizes.
        rule = self.rules["enlarge_conv_s1_same_none_1x1_to_3x3"]
        unpinned = dataclasses.replace(rule, name="unpinned", src=tuple(
            dataclasses.replace(op, params=tuple((k, v) for k, v in op.params
                                                 if k not in ("kernel_h", "kernel_w")))
            for op in rule.src))
        graph = siblings((1, 4, 6, 6), (4, 4, 3, 3), (4, 4, 3, 3))
        loop = XferSet([unpinned])
        for step in range(3):
            self.assertEqual(graph.op_counts().get("enlarge", 0), step)
            graph = loop.locations(graph).apply(0, 0)
        equal = siblings((1, 4, 6, 6), (4, 4, 3, 3), (4, 4, 3, 3))
        self.assertEqual(fired(self.xfers, equal), {"merge_convs_s1_same_none": 2})

    def test_where_the_steps_do_not_fire(self):
        cases = {
            # Stride 2: SAME pads a 3x3 kernel unevenly, an enlarged 1x1
            # would read another pixel (docs/rules.md).
            "stride 2": siblings((1, 4, 6, 6), (4, 4, 1, 1), (4, 4, 3, 3), strides=(2, 2)),
            "VALID": siblings((1, 4, 6, 6), (4, 4, 1, 1), (4, 4, 3, 3), padding="VALID"),
            "activations differ": siblings((1, 4, 6, 6), (4, 4, 1, 1), (4, 4, 3, 3),
                                           activation="NONE", activation2="RELU"),
            # Grouped convs: stacking their weights regroups the outputs.
            "grouped": siblings((1, 4, 6, 6), (4, 2, 1, 1), (4, 2, 3, 3)),
            "grouped, equal kernels": siblings((1, 4, 6, 6), (4, 1, 3, 3), (4, 1, 3, 3)),
            # 1x3 cannot be centred in 3x1 nor the other way round.
            "1x3 and 3x1": siblings((1, 4, 6, 6), (4, 4, 1, 3), (4, 4, 3, 1)),
            "7x7 target": siblings((1, 4, 8, 8), (4, 4, 1, 1), (4, 4, 7, 7)),
        }
        for what, graph in cases.items():
            with self.subTest(what):
                self.assertEqual(fired(self.xfers, graph), {})

    def test_merge_needs_equal_kernels(self):
        # The concatenation of the weights on axis 0 fails shape inference
        # for unequal kernels, so the merge has no location there.
        merge = XferSet([self.rules["merge_convs_s1_same_none"]])
        self.assertEqual(fired(merge, siblings((1, 4, 6, 6), (4, 4, 1, 1), (4, 4, 3, 3))), {})
        self.assertEqual(fired(merge, siblings((1, 4, 6, 6), (4, 4, 3, 3), (4, 4, 3, 3))),
                         {"merge_convs_s1_same_none": 2})


class DetourTest(absltest.TestCase):
    """On a fire module the enlargement costs more and the merge after it
    less than the start: a search that accepts a costlier step finds it,
    one-step greedy does not."""

    def setUp(self):
        super().setUp()
        self.cost_model = CostModel("analytic", profile="v100")
        self.xfers = XferSet(list(_rules().values()))

    def test_enlarge_costs_more_then_merge_costs_less(self):
        start = fire()
        locs = self.xfers.locations(start)
        self.assertEqual({self.xfers.names[x]: n for x, n in enumerate(locs.counts) if n},
                         {"enlarge_conv_s1_same_relu_1x1_to_3x3": 1})
        enlarged = locs.apply(self.xfers.names.index("enlarge_conv_s1_same_relu_1x1_to_3x3"), 0)
        merged = self.xfers.locations(enlarged).apply(
            self.xfers.names.index("merge_convs_s1_same_relu"), 0)
        cost = {name: g.cost(self.cost_model)
                for name, g in (("start", start), ("enlarged", enlarged), ("merged", merged))}
        self.assertGreater(cost["enlarged"], cost["start"])
        self.assertLess(cost["merged"], cost["start"])
        # Every one-step candidate from the start costs more: greedy stops there.
        candidates = locs.costs(self.cost_model)
        self.assertTrue((candidates[~np.isnan(candidates)] > cost["start"]).all())
        # TASO's search takes the detour when alpha admits the costlier step.
        found = self.xfers.search(start, self.cost_model, alpha=1.2, budget=20)
        self.assertAlmostEqual(found.best_cost, cost["merged"], places=9)
        stuck = self.xfers.search(start, self.cost_model, alpha=1.0, budget=20)
        self.assertAlmostEqual(stuck.best_cost, cost["start"], places=9)

    def test_compound_builtin_takes_it_in_one_step(self):
        # The built-in set's compound xfer reaches the same cost directly.
        compound = XferSet([r for r in load_rule_set("builtin")
                            if r.name == "enlarge_merge_convs_s1_same_relu"])
        start = fire()
        merged = compound.locations(start).apply(0, 0)
        enlarged = self.xfers.locations(start).apply(
            self.xfers.names.index("enlarge_conv_s1_same_relu_1x1_to_3x3"), 0)
        two_steps = self.xfers.locations(enlarged).apply(
            self.xfers.names.index("merge_convs_s1_same_relu"), 0)
        self.assertAlmostEqual(merged.cost(self.cost_model), two_steps.cost(self.cost_model),
                               places=9)


if __name__ == "__main__":
    absltest.main()
