"""Tests of the substitution generator."""

from absl.testing import absltest
import numpy as np

from xflowrl.generator import emit, enumeration, fingerprint, generate, pipeline
from xflowrl.graphs import XferSet, rules_io
from xflowrl.graphs.rules_io import PatternOp, PatternTensor, Rule
from xflowrl.graphs.xfers import GENERATED_RULES

from tests.graphs.semantics_test import check_all_locations, instantiate

X0, X1, X2 = (("input", n) for n in ("x0", "x1", "x2"))
MATRIX = enumeration.FAMILIES["matrix"]


def _add(a, b):
    return ("add", (), a, b)


class GeneratorTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rules, cls.report = generate(2)

    def test_report_adds_up(self):
        r = self.report
        self.assertEqual(r.verified + r.rejected, r.candidate_pairs)
        self.assertEqual(r.kept + r.pruned_renaming + r.pruned_shared_tail + r.pruned_instance
                         + r.pruned_unbound_target, r.verified)
        self.assertEqual(r.kept, len(self.rules))
        self.assertGreater(r.rejected, 0)  # x^5 collisions the float check throws out

    def test_known_rules_appear(self):
        v = lambda k: PatternTensor(-k, 0)
        fusion = Rule("fuse", (PatternOp("matmul", (v(1), v(2)), (("activation", 0),)),
                               PatternOp("relu", (PatternTensor(0, 0),))),
                      (PatternOp("matmul", (v(1), v(2)), (("activation", 2),)),),
                      ((PatternTensor(1, 0), PatternTensor(0, 0)),))
        keys = {emit.canonical(r) for r in self.rules}
        self.assertIn(emit.canonical(fusion), keys)
        # Associativity of add, in some orientation.
        assoc = [r for r in self.rules if [o.type for o in r.src] == ["add", "add"]
                 and [o.type for o in r.dst] == ["add", "add"]]
        self.assertNotEmpty(assoc)

    def test_planted_wrong_candidates_are_rejected(self):
        self.assertFalse(pipeline._verify(("relu", (), X0), X0, MATRIX, seed=0))
        self.assertFalse(pipeline._verify(("relu", (), _add(X0, X1)),
                                          _add(("relu", (), X0), ("relu", (), X1)), MATRIX, 0))
        self.assertTrue(pipeline._verify(_add(_add(X0, X1), X2), _add(X0, _add(X1, X2)),
                                         MATRIX, 0))

    def test_fingerprint_is_exact_and_tells_relu_apart(self):
        values = fingerprint.random_inputs(MATRIX, seed=3)
        fp = lambda e: fingerprint.fingerprint(e, values, {})
        self.assertEqual(fp(_add(_add(X0, X1), X2)), fp(_add(X0, _add(X1, X2))))
        self.assertNotEqual(fp(("relu", (), _add(X0, X1))),
                            fp(_add(("relu", (), X0), ("relu", (), X1))))
        x = np.arange(5000, dtype=np.int64)
        self.assertLen(set(fingerprint.relu_standin(x).tolist()), 5000)  # injective

    def test_renamings_share_a_key(self):
        a = pipeline._renaming_key(_add(X0, X1), _add(X1, X0), MATRIX)
        b = pipeline._renaming_key(_add(X1, X2), _add(X2, X1), MATRIX)
        self.assertEqual(a, b)

    def test_shipped_rules_are_a_k2_run_and_preserve_semantics(self):
        shipped = rules_io.load_rules(GENERATED_RULES)
        self.assertEqual([emit.canonical(r) for r in shipped],
                         [emit.canonical(r) for r in self.rules])
        xfers = XferSet.from_name("generated")
        self.assertEqual(len(xfers), 15 + len(shipped))
        for index, rule in enumerate(shipped):
            graph = instantiate(rule)
            self.assertIsNotNone(graph, rule.name)
            with self.subTest(rule=rule.name):
                check_all_locations(self, XferSet([rule]), graph, seed=index)

    def test_unknown_rule_set(self):
        with self.assertRaisesRegex(ValueError, "unknown rule set 'best'"):
            XferSet.from_name("best")


if __name__ == "__main__":
    absltest.main()
