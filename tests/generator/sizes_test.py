"""Tests of the size search (sizes.py) and the evaluation at other sizes
(other_sizes.py); the cross-check against z3 skips where z3 is missing."""

import importlib.util

from absl.testing import absltest
import numpy as np

from xflowrl.generator import other_sizes, sizes
from xflowrl.rules import rules_io
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule
from xflowrl.rules.sets import BUILTIN_RULES, GENERATED_RULES, TASO_RULES_JSON

V = lambda k: PatternTensor(-k, 0)
O = lambda j, i=0: PatternTensor(j, i)
MM = (("activation", 0),)


def _matmul_assoc():
    """(v1 v2) v3 -> v1 (v2 v3)."""
    return Rule("assoc",
                (PatternOp("matmul", (V(1), V(2)), MM), PatternOp("matmul", (O(0), V(3)), MM)),
                (PatternOp("matmul", (V(2), V(3)), MM), PatternOp("matmul", (V(1), O(0)), MM)),
                ((O(1), O(1)),))


def _square_only():
    """concat1(a, b) @ concat0(a, c) -> concat1(b, a) @ concat0(c, a): both
    are a @ a + b @ c when a is square, and differ otherwise."""
    return Rule("square_only",
                (PatternOp("concat", (V(1), V(2)), (("axis", 1),)),
                 PatternOp("concat", (V(1), V(3)), (("axis", 0),)),
                 PatternOp("matmul", (O(0), O(1)), MM)),
                (PatternOp("concat", (V(2), V(1)), (("axis", 1),)),
                 PatternOp("concat", (V(3), V(1)), (("axis", 0),)),
                 PatternOp("matmul", (O(0), O(1)), MM)),
                ((O(2), O(2)),))


def _covered(rules):
    out = []
    for rule in rules:
        try:
            sizes.SizeProblem(rule, 5)
        except ValueError:
            continue
        out.append(rule)
    return out


class SizesTest(absltest.TestCase):

    def test_linear_conditions(self):
        x, y = sizes.Lin.unknown("x"), sizes.Lin.unknown("y")
        self.assertEqual((x + 2 - x) == 2, True)
        ((kind, lin),) = (x + y) <= 7
        self.assertEqual(kind, "ge")
        self.assertEqual(lin.value({"x": 3, "y": 4}), 0)
        self.assertEqual(((x - y) % 2 == 0)[0][0], "even")

    def test_bindings_satisfy_the_source_and_are_reproducible(self):
        assoc = _matmul_assoc()
        bindings = sizes.shape_bindings(assoc, count=5)
        self.assertLen(bindings, 5)
        self.assertLen({tuple(sorted(b.items())) for b in bindings}, 5)
        for b in bindings:
            self.assertEqual(set(b), {-1, -2, -3})
            self.assertEqual(b[-1][1], b[-2][0])
            self.assertEqual(b[-2][1], b[-3][0])
            self.assertTrue(all(s[2:] == (1, 1) and 1 <= min(s) and max(s) <= 5
                                for s in b.values()))
        self.assertEqual(sizes.shape_bindings(assoc, count=5), bindings)

    def test_a_rule_that_never_applies_has_no_bindings(self):
        # The source pins one weight to a 1x1 and to a 3x3 kernel.
        conv = (("activation", 0), ("padding", 0), ("stride_h", 1), ("stride_w", 1))
        rule = Rule("never", (PatternOp("conv2d", (V(1), V(2)), conv + (("kernel_h", 1),)),
                              PatternOp("conv2d", (V(1), V(2)), conv + (("kernel_h", 3),))),
                    (PatternOp("conv2d", (V(1), V(2)), conv),), ((O(0), O(0)),))
        self.assertEqual(sizes.bindings(rule), [])

    def test_counterexample_at_other_sizes(self):
        witness = other_sizes.counterexample(_square_only())
        self.assertIsNotNone(witness)
        self.assertIn("differ by", witness)
        self.assertIsNone(other_sizes.counterexample(_matmul_assoc()))

    def test_uncovered_ops_are_refused(self):
        fold = next(r for r in rules_io.load_rules(BUILTIN_RULES) if r.name == "conv_bn_s1_same")
        with self.assertRaisesRegex(ValueError, "no axioms for op type batchnorm"):
            sizes.bindings(fold)

    @absltest.skipUnless(importlib.util.find_spec("z3"), "z3 is not installed")
    def test_satisfiability_agrees_with_z3(self):
        # The search's outcome depends only on satisfiability answers, so
        # exact answers give the sizes z3 gave. Random partial assignments
        # on a sample of the shipped rules and all of TASO's covered ones.
        import z3

        from xflowrl.generator import z3_encoding
        S = z3_encoding.Signature()
        rules = (_covered(rules_io.load_rules(GENERATED_RULES))[::40]
                 + _covered(rules_io.load_rules(TASO_RULES_JSON)) + [_square_only()])
        rng = np.random.default_rng(0)
        checked = {True: 0, False: 0}
        for rule in rules:
            problem = sizes.SizeProblem(rule, 5)
            enc = z3_encoding.Encoder(S, rule)
            solver = z3.SimpleSolver()
            solver.add(enc.size_problem(5))
            keys = [("v", k, i) for k in problem.variables for i in range(4)]
            for _ in range(4):
                chosen = rng.permutation(len(keys))[:int(rng.integers(0, len(keys) + 1))]
                fixed = {keys[j]: int(rng.integers(1, 6)) for j in chosen}
                expected = solver.check(*[S.dim(i, enc.variables[k]) == v
                                          for (_, k, i), v in fixed.items()]) == z3.sat
                with self.subTest(rule=rule.name, fixed=fixed):
                    self.assertEqual(problem.satisfiable(fixed), expected)
                checked[expected] += 1
        self.assertGreater(min(checked.values()), 20)  # both answers exercised


if __name__ == "__main__":
    absltest.main()
