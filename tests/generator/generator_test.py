"""Tests of the substitution generator."""

import importlib.util
import os
from unittest import mock

from absl.testing import absltest
import numpy as np

from tests.rules.semantics_test import assert_equivalent, check_all_locations, instantiations
from xflowrl.engine import CostModel, GraphBuilder, XferSet
from xflowrl.generator import emit, enumeration, fingerprint, generate, pipeline
from xflowrl.rules import rules_io
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule
from xflowrl.rules.sets import GENERATED_RULES, RULE_SETS, TASO_RULES_JSON, load_rule_set

X0, X1, X2 = (("input", n) for n in ("x0", "x1", "x2"))
I0, W0, W1 = ("input", "i0"), ("input", "w0"), ("input", "w1")
MATRIX = enumeration.FAMILIES["matrix"]
CONV = enumeration.FAMILIES["conv"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _add(a, b):
    return ("add", (), a, b)


def _conv(x, w):
    return ("conv2d", enumeration._CONV, x, w)


def _concat(axis, a, b):
    return ("concat", (("axis", axis),), a, b)


def _relu(x):
    return ("relu", (), x)


V = lambda k: PatternTensor(-k, 0)


class GeneratorTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rules, cls.report = generate(2, workers=2)
        cls.keys = {emit.canonical(r) for r in cls.rules}

    def test_report_adds_up(self):
        r = self.report
        self.assertEqual(r.verified + r.rejected, r.candidate_pairs)
        pruned = sum(v for k, v in vars(r).items() if k.startswith("pruned_"))
        self.assertEqual(r.kept + pruned + r.rejected_other_sizes, r.verified)
        self.assertEqual(r.kept, len(self.rules))
        self.assertGreater(r.rejected, 0)  # x^5 collisions the float check throws out
        self.assertGreater(r.graphs_enumerated, 2000)

    def test_known_rules_appear(self):
        fusion = Rule("fuse", (PatternOp("matmul", (V(1), V(2)), (("activation", 0),)),
                               PatternOp("relu", (PatternTensor(0, 0),))),
                      (PatternOp("matmul", (V(1), V(2)), (("activation", 2),)),),
                      ((PatternTensor(1, 0), PatternTensor(0, 0)),))
        self.assertIn(emit.canonical(fusion), self.keys)
        # TASO's rule 0, matmul associativity, up to renaming.
        taso = rules_io.load_rules(TASO_RULES_JSON)
        self.assertIn(emit.canonical(taso[0]), self.keys)
        # transpose(a @ b) = transpose(b) @ transpose(a), in some orientation.
        self.assertTrue(any({o.type for o in r.src} | {o.type for o in r.dst}
                            == {"matmul", "transpose"} for r in self.rules))

    def test_canonical_ignores_renaming_order_and_commutation(self):
        a = Rule("a", (PatternOp("add", (V(1), V(2))), PatternOp("relu", (PatternTensor(0, 0),))),
                 (PatternOp("relu", (V(1),)),), ((PatternTensor(1, 0), PatternTensor(0, 0)),))
        b = Rule("b", (PatternOp("add", (V(3), V(1))), PatternOp("relu", (PatternTensor(0, 0),))),
                 (PatternOp("relu", (V(3),)),), ((PatternTensor(1, 0), PatternTensor(0, 0)),))
        c = Rule("c", (PatternOp("add", (V(3), V(1))), PatternOp("relu", (PatternTensor(0, 0),))),
                 (PatternOp("relu", (V(1),)),), ((PatternTensor(1, 0), PatternTensor(0, 0)),))
        self.assertEqual(emit.canonical(a), emit.canonical(b))
        self.assertEqual(emit.canonical(a), emit.canonical(c))  # add commutes
        d = Rule("d", a.src, (PatternOp("sigmoid", (V(1),)),), a.mapped_outputs)
        self.assertNotEqual(emit.canonical(a), emit.canonical(d))

    def test_planted_wrong_candidates_are_rejected(self):
        self.assertFalse(pipeline._verify(_relu(X0), X0, MATRIX, seed=0))
        self.assertFalse(pipeline._verify(_relu(_add(X0, X1)),
                                          _add(_relu(X0), _relu(X1)), MATRIX, 0))
        self.assertTrue(pipeline._verify(_add(_add(X0, X1), X2), _add(X0, _add(X1, X2)),
                                         MATRIX, 0))
        # Two outputs: merging two convs of one input splits the output
        # channels (axis 1), not the batch (axis 0).
        merged = _conv(I0, _concat(0, W0, W1))
        self.assertTrue(pipeline._verify((_conv(I0, W0), _conv(I0, W1)),
                                         pipeline.SplitOf(merged, 1), CONV, 0))
        self.assertFalse(pipeline._verify((_conv(I0, W0), _conv(I0, W1)),
                                          pipeline.SplitOf(merged, 0), CONV, 0))

    def test_a_planted_fingerprint_collision_never_becomes_a_rule(self):
        # With ReLU's stand-in replaced by the identity, ReLU looks linear to
        # the fingerprints: relu(a + b) and relu(a) + relu(b) collide. The
        # float verification must throw every such pair out.
        with mock.patch.object(fingerprint, "relu_standin", lambda x: x % fingerprint.P):
            rules, report = generate(2, ["matrix"], workers=1)
        self.assertGreater(report.rejected, self.report.rejected)
        wrong = Rule("w", (PatternOp("add", (V(1), V(2))), PatternOp("relu", (PatternTensor(0, 0),))),
                     (PatternOp("relu", (V(1),)), PatternOp("relu", (V(2),)),
                      PatternOp("add", (PatternTensor(0, 0), PatternTensor(1, 0)))),
                     ((PatternTensor(1, 0), PatternTensor(2, 0)),))
        keys = {emit.canonical(r) for r in rules}
        self.assertNotIn(emit.canonical(wrong), keys)
        for index, rule in enumerate(rules):
            for graph in instantiations(rule, limit=1):
                with self.subTest(rule=rule.name):
                    check_all_locations(self, XferSet([rule]), graph, seed=index)

    def test_a_rule_rejected_at_other_sizes_prunes_nothing(self):
        # The check runs speculatively in workers, then pruning reruns; a
        # rejected rule must not prune its instances or duplicates, which
        # then get checked themselves (here: rejected too).
        with mock.patch.object(pipeline.other_sizes, "counterexample", lambda rule: "planted"):
            rules, report = generate(2, workers=2)
        base = self.report
        self.assertEqual(rules, [])
        self.assertEqual((report.pruned_instance, report.pruned_duplicate), (0, 0))
        self.assertGreater(base.pruned_instance + base.pruned_duplicate, 0)
        self.assertEqual(report.rejected_other_sizes,
                         base.kept + base.pruned_instance + base.pruned_duplicate
                         + base.rejected_other_sizes)

    def test_fingerprint_is_exact_and_tells_relu_apart(self):
        values = fingerprint.random_inputs(MATRIX, seed=3)
        fp = lambda e: fingerprint.fingerprint(e, values, {})
        self.assertEqual(fp(_add(_add(X0, X1), X2)), fp(_add(X0, _add(X1, X2))))
        self.assertNotEqual(fp(_relu(_add(X0, X1))), fp(_add(_relu(X0), _relu(X1))))
        x = np.arange(5000, dtype=np.int64)
        self.assertLen(set(fingerprint.relu_standin(x).tolist()), 5000)  # injective
        # Average pooling is linear exactly (modular inverse of window sizes).
        cvalues = fingerprint.random_inputs(CONV, seed=3)
        pool = lambda e: ("avgpool", enumeration._POOL, e)
        cfp = lambda e: fingerprint.fingerprint(e, cvalues, {})
        self.assertEqual(cfp(pool(_add(I0, ("input", "i1")))),
                         cfp(_add(pool(I0), pool(("input", "i1")))))

    def test_enumeration_counts_each_graph_once(self):
        u = enumeration.Universe(MATRIX)
        u.grow(2)
        exprs = u.exprs[len(MATRIX.inputs):]
        self.assertLen(set(exprs), len(exprs))
        self.assertTrue(all(enumeration.num_ops(e) == len(u.ops[i + len(MATRIX.inputs)])
                            for i, e in enumerate(exprs)))
        # add(x0, x0), add(x0, x1), ... : 10 unordered pairs of the 4 matrices;
        # the scale s is read by scalar_mul only.
        self.assertLen([e for e in exprs if e[0] == "add" and e[2][0] == e[3][0] == "input"], 10)
        self.assertFalse([e for e in exprs if e[0] != "scalar_mul" and ("input", "s") in e[2:]])
        self.assertIn(("scalar_mul", (), ("input", "x0"), ("input", "s")), exprs)
        # Roles: a weight is never convolved as data, nor pooled.
        c = enumeration.Universe(CONV)
        c.grow(2)
        for e in c.exprs:
            if e[0] == "conv2d":
                self.assertEqual(c.kinds[c.exprs.index(e[2])], "data")
            if e[0] in ("avgpool", "maxpool"):
                self.assertEqual(c.kinds[c.exprs.index(e[2])], "data")

    def test_renamings_share_a_key(self):
        a = pipeline._renaming_key(_add(X0, X1), _add(X1, X0), MATRIX)
        b = pipeline._renaming_key(_add(X1, X2), _add(X2, X1), MATRIX)
        self.assertEqual(a, b)

    def test_rule_sets(self):
        self.assertEqual(len(XferSet.from_name("default")),
                         len(load_rule_set("builtin")) + len(load_rule_set("generated")))
        self.assertEqual(set(RULE_SETS), {"default", "builtin+taso", "builtin", "generated",
                                          "taso", "tensat", "primitive", "tensat_full"})
        with self.assertRaisesRegex(ValueError, "unknown rule set 'best'"):
            XferSet.from_name("best")

    def test_shipped_rules_hold_taso_s_matrix_merge(self):
        # That the shipped default set is what `generate_rules.py --max_ops=3`
        # writes is checked by scripts/check_generated_rules.py (.ci/run: a
        # minute of generation); its semantics rule by rule in
        # tests/rules/semantics_test.py. With four matrix inputs: TASO's
        # x1 w1 + x2 w2 -> concat(x1, x2) concat(w1, w2).
        merge = next(r for r in rules_io.load_rules(TASO_RULES_JSON) if r.name == "taso_73")
        self.assertIn(emit.canonical(merge),
                      {emit.canonical(r) for r in rules_io.load_rules(GENERATED_RULES)})


class CheckGeneratedRulesTest(absltest.TestCase):
    """scripts/check_generated_rules.py (run by .ci/run) fails on each
    difference it is there to catch."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        spec = importlib.util.spec_from_file_location(
            "check_generated_rules", os.path.join(REPO, "scripts", "check_generated_rules.py"))
        cls.check = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.check)
        cls.shipped = rules_io.load_rules(GENERATED_RULES)
        square_only = cls.check.SQUARE_ONLY_RULE + "concat1(matmul_relu(x0, x0), ...)"
        cls.report = {"kept": len(cls.shipped), "kept_two_output": 54,
                      "taso_rules_rediscovered": 85, "rejected_other_sizes": 2,
                      "rejected_other_sizes_rules": ["a(x) -> b(x)", square_only]}

    def failures(self, rules=None, **report):
        return self.check.failures(self.shipped if rules is None else rules,
                                   dict(self.report, **report), self.shipped)

    def test_the_shipped_rules_and_their_report_pass(self):
        self.assertEqual(self.failures(), [])

    def test_each_difference_fails(self):
        self.assertRegex(" ".join(self.failures(rules=self.shipped[:-1])),
                         f"wrote {len(self.shipped) - 1} rules, not the {len(self.shipped)}")
        self.assertLen(self.failures(rules=self.shipped[1:] + self.shipped[:1]), 1)
        self.assertRegex(" ".join(self.failures(kept=1)), "kept 1")
        self.assertRegex(" ".join(self.failures(kept_two_output=0)), "two outputs")
        self.assertRegex(" ".join(self.failures(taso_rules_rediscovered=84)),
                         "84 of TASO's rules")
        self.assertRegex(" ".join(self.failures(rejected_other_sizes=3)), "3 but 2 listed")
        self.assertRegex(" ".join(self.failures(rejected_other_sizes=1,
                                                rejected_other_sizes_rules=["a(x) -> b(x)"])),
                         "square x0")


class ScalarRulesTest(absltest.TestCase):

    def test_search_folds_an_attention_scale_into_the_weights(self):
        # scores = (x wq)(x wk)^T * s, as BERT scales by 1/sqrt(d). The
        # generated scalar rules move s through the products onto wk, where
        # it is weight-side (free); TASO's shipped rules have no scalar ops.
        b = GraphBuilder()
        x = b.input(shape=(64, 256), name="x")
        wq, wk = (b.weight(shape=(256, 64), name=n) for n in ("wq", "wk"))
        q, k = b.matmul(a=x, b=wq), b.matmul(a=x, b=wk)
        b.scalar_mul(x=b.matmul(a=q, b=b.transpose(input=k, perm=(1, 0))),
                     scale=b.weight(shape=(1,), name="scale"))
        graph = b.build()
        cost = CostModel("analytic")
        ours = XferSet.default().search(graph, cost, alpha=1.05, budget=1000)
        theirs = XferSet.from_name("builtin+taso").search(graph, cost, alpha=1.05, budget=1000)
        self.assertLess(ours.best_cost, theirs.best_cost)
        self.assertTrue(any(name.startswith("gen_") for name in ours.applied_names))
        scaled = [side for op, side in zip(ours.graph.ops(), ours.graph.weight_side())
                  if op.type == "scalar_mul"]
        self.assertEqual(scaled, [True])
        assert_equivalent(self, graph, ours.graph, seed=0, what="scaled attention")


if __name__ == "__main__":
    absltest.main()
