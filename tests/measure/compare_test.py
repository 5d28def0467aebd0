"""`xflowrl.measure.compare`: interleaved rounds and their spread."""

import itertools

from absl.testing import absltest
import numpy as np

from xflowrl.measure import compare


class InterleavedTimesTest(absltest.TestCase):

    def test_every_runner_runs_warmup_plus_repeats_per_round(self):
        calls = {"a": 0, "b": 0, "c": 0}
        order = []

        def runner(name):
            def run():
                calls[name] += 1
                order.append(name)
            return run

        times = compare.interleaved_times({n: runner(n) for n in calls}, rounds=4, warmup=2,
                                          repeats=3, rng=np.random.default_rng(0),
                                          cpu_clock=itertools.count().__next__)
        self.assertEqual(calls, {"a": 20, "b": 20, "c": 20})
        for name in calls:
            self.assertLen(times[name]["wall"], 4)
            # The fake CPU clock ticks once per read: 1 tick (1000 ms) per call.
            self.assertEqual(times[name]["cpu"], [1000.0] * 4)
        # Each round runs every runner's calls in one block, in a random order.
        blocks = [order[i][0] for i in range(0, len(order), 5)]
        rounds = [tuple(blocks[i:i + 3]) for i in range(0, 12, 3)]
        self.assertTrue(all(sorted(r) == ["a", "b", "c"] for r in rounds))
        self.assertGreater(len(set(rounds)), 1)

    def test_spread(self):
        s = compare.spread([4.0, 1.0, 3.0, 2.0, 5.0])
        self.assertEqual((s["median_ms"], s["q1_ms"], s["q3_ms"], s["min_ms"], s["max_ms"]),
                         (3.0, 2.0, 4.0, 1.0, 5.0))
        self.assertEqual(s["rounds_ms"], [4.0, 1.0, 3.0, 2.0, 5.0])

    def test_unknown_runtime(self):
        with self.assertRaisesRegex(ValueError, "unknown runtime"):
            compare.make_runner("trt", None, {})


if __name__ == "__main__":
    absltest.main()
