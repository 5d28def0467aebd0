"""The rewriter's exception-free shape check (`try_infer_shapes` in ops.h):
wherever it says a target op's shapes fail, the engine's shape inference
must raise; else a candidate would be dropped that the engine before it
kept. Checked on random shapes (fixed seed) for every op type the
pre-check covers, plus cases it must catch."""

from absl.testing import absltest, parameterized
import numpy as np

from xflowrl import _engine

ADD, MUL, SUB, DIV = (_engine.op_type_id(n) for n in ("add", "mul", "sub", "div"))
MATMUL, CONCAT, CONV, SPLIT = (_engine.op_type_id(n) for n in
                               ("matmul", "concat", "conv2d", "split"))


def _raises(type_id, params, shapes):
    try:
        _engine.infer_output_shapes(type_id, params, shapes)
    except ValueError:
        return True
    return False


def _random_case(rng, type_id):
    """Shapes (and parameters) that are right about half the time."""
    dims = lambda rank: [int(d) for d in rng.choice([1, 2, 3, 4, 6], size=rank)]
    if type_id == CONV:
        return {"padding": 0}, [dims(4), dims(4)]
    if type_id == CONCAT:
        rank = int(rng.integers(1, 4))
        base = dims(rank)
        shapes = [list(base) for _ in range(int(rng.integers(1, 4)))]
        for s in shapes:
            if rng.random() < 0.5:
                s[int(rng.integers(0, rank))] = int(rng.integers(1, 5))
            if rng.random() < 0.1:
                s.append(2)
        return {"axis": int(rng.integers(-1, rank + 1))}, shapes
    if type_id == SPLIT:
        rank = int(rng.integers(1, 4))
        shape = dims(rank)
        sizes = [int(v) for v in rng.integers(0, 4, size=int(rng.integers(1, 4)))]
        return {"axis": int(rng.integers(-1, rank + 1)), "sizes": sizes}, [shape]
    rank_a, rank_b = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if rng.random() < 0.5:
        rank_b = rank_a
    shapes = [dims(rank_a), dims(rank_b)]
    if type_id == MATMUL and rng.random() < 0.5 and rank_a == rank_b and rank_a >= 2:
        shapes[1][-2] = shapes[0][-1]
        shapes[1][:-2] = shapes[0][:-2]
    if rng.random() < 0.1:
        shapes.append(dims(rank_a))  # a wrong input count
    return {}, shapes


class ShapePrecheckTest(parameterized.TestCase):

    @parameterized.parameters(ADD, MUL, SUB, DIV, MATMUL, CONCAT, CONV, SPLIT)
    def test_surely_fail_implies_inference_fails(self, type_id):
        rng = np.random.default_rng(type_id)
        flagged = 0
        for _ in range(400):
            params, shapes = _random_case(rng, type_id)
            if _engine.shape_precheck_fails(type_id, params, shapes):
                flagged += 1
                self.assertTrue(_raises(type_id, params, shapes), (type_id, params, shapes))
        self.assertGreater(flagged, 20)  # the random cases exercise the check

    def test_catches_the_common_mismatches(self):
        cases = [
            (MATMUL, {}, [[4, 8], [4, 8]]),          # inner dimensions differ
            (MATMUL, {}, [[2, 4, 8], [3, 8, 4]]),    # batch dimensions differ
            (MATMUL, {}, [[4, 8], [2, 8, 4]]),       # ranks differ
            (ADD, {}, [[2, 3], [2, 4]]),             # no broadcast
            (CONCAT, {"axis": 1}, [[2, 3], [3, 3]]),  # differ off the axis
            (CONV, {"padding": 0}, [[1, 6, 8, 8], [4, 4, 3, 3]]),  # 6 % 4 channels
            (SPLIT, {"axis": 0, "sizes": [1, 1]}, [[3, 4]]),  # sizes sum to 2
        ]
        for type_id, params, shapes in cases:
            with self.subTest(type_id=type_id, shapes=shapes):
                self.assertTrue(_engine.shape_precheck_fails(type_id, params, shapes))
                self.assertTrue(_raises(type_id, params, shapes))
        self.assertFalse(_engine.shape_precheck_fails(MATMUL, {}, [[4, 8], [8, 2]]))


if __name__ == "__main__":
    absltest.main()
