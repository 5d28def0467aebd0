"""Tests of the learned GPU cost model's data set and its files (no GPU)."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel
from xflowrl.measure import gpu_calibration, gpu_data


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


class FilesTest(absltest.TestCase):

    def test_records_and_graphs_round_trip_and_merge(self):
        src, dst = tempfile.mkdtemp(), tempfile.mkdtemp()
        g = zoo.get_graph("small_cnn")
        h = zoo.get_graph("small_cnn", batch_size=2)
        recs = [{"source": "zoo", "name": "small_cnn", "variant": "original", "batch": b,
                 "dtype": "float32", "mode": "graph", "median_ms": 0.1 * b, "graph_obj": x}
                for b, x in ((1, g), (2, h))]
        out = gpu_data.append_records(src, "z1", recs, command="cmd")
        self.assertEqual((out["appended"], out["total"]), (2, 2))
        got = gpu_data.read_records(src, "z1")
        self.assertEqual([r["command"] for r in got], ["cmd", "cmd"])
        self.assertEqual(got[0]["graph"], gpu_data.graph_sha(g))
        self.assertNotEqual(got[0]["graph"], got[1]["graph"])
        back = gpu_data.load_graph(src, got[1]["graph"])
        self.assertEqual(back.to_data(), h.to_data())
        self.assertEqual(gpu_data.merge(src, dst), {"z1": 2})
        self.assertEqual(gpu_data.merge(src, dst), {"z1": 0})  # nothing twice
        self.assertEqual(len(gpu_data.read_records(dst, "z1")), 2)
        self.assertEqual(gpu_data.load_graph(dst, got[0]["graph"]).to_data(), g.to_data())
        self.assertEqual(gpu_data.cards(dst), ["z1"])

    def test_shipped_data_names_stored_graphs_and_commands(self):
        for card in ("h200", "h100"):
            recs = gpu_data.read_records(gpu_data.DATA_DIR, card)
            self.assertNotEmpty(recs)
            for r in recs:
                self.assertTrue(r["command"])
                self.assertTrue(os.path.exists(os.path.join(
                    gpu_data.DATA_DIR, gpu_data.GRAPHS_DIR, f"{r['graph']}.json.gz")))
            # The imported graphs are what the reports timed: the
            # original's analytic/v100 cost is the report's.
            report = json.load(open(os.path.join(
                os.path.dirname(__file__), "..", "..", "docs", "data",
                f"cudnn_bench_{card}_graph_timing.json")))
            v100 = CostModel("analytic/v100")
            for r in recs:
                if r["source"] == "zoo" and r["variant"] == "original":
                    g = gpu_data.load_graph(gpu_data.DATA_DIR, r["graph"])
                    self.assertAlmostEqual(
                        g.cost(v100), report["graphs"][r["name"]]["cost_ms"]["analytic_v100"],
                        places=9)


class ItemsTest(absltest.TestCase):

    def test_tiny_items_in_priority_order(self):
        config = gpu_data.CollectConfig(batches=(1, 2), dtypes=("float32",), tiny=True,
                                        zoo=("small_cnn",), walk_steps=3, walk_points=1,
                                        micro=1, device="cpu")
        items = list(gpu_data.items(config))
        sources = [it.source for it in items]
        self.assertEqual(sources[:2], ["zoo", "zoo"])
        self.assertEqual([it.batch for it in items[:2]], [1, 2])
        # Phases do not interleave: zoo, greedy, random, micro, walk points.
        order = ["zoo", "greedy", "random", "micro"]
        firsts = [sources.index(s) for s in order]
        self.assertEqual(firsts, sorted(firsts))
        v100 = CostModel("analytic/v100")
        for it in items:
            if it.source in ("greedy", "random"):
                self.assertIsNotNone(it.origin)
                self.assertEqual(it.graph.inputs()["data"][0], it.batch)
                self.assertEqual(it.origin.inputs()["data"][0], it.batch)
            if it.source == "greedy" and it.variant.startswith("greedy@"):
                self.assertLess(it.graph.cost(v100), it.origin.cost(v100))
        final = [it for it in items if it.source == "random" and it.batch == 1]
        self.assertTrue(final)
        self.assertNotEqual(final[0].graph.to_data(), final[0].origin.to_data())

    def test_walk_points(self):
        self.assertEqual(gpu_data._walk_points(12, 3), [3, 6, 9])
        self.assertEqual(gpu_data._walk_points(1, 3), [])
        self.assertEqual(gpu_data._walk_points(4, 8), [1, 2, 3])

    def test_budgets(self):
        self.assertEqual(gpu_data.CollectConfig.for_budget("full").corpus, 12)
        self.assertEqual(gpu_data.CollectConfig.for_budget("quick", seed=3).seed, 3)
        with self.assertRaisesRegex(ValueError, "unknown budget"):
            gpu_data.CollectConfig.for_budget("huge")


class CollectTest(absltest.TestCase):

    def test_collect_on_the_cpu_times_every_item_and_precision(self):
        config = gpu_data.CollectConfig(batches=(1,), dtypes=("float32", "bfloat16"),
                                        tiny=True, zoo=("small_cnn",), walk_steps=2,
                                        walk_points=0, micro=0, device="cpu", rounds=1,
                                        repeats=1, warmup=0)
        result = gpu_data.collect(config)
        self.assertEqual(result["failed"], [])
        mode = "cpu" if _has_torch() and gpu_data._program_takes_device() else "reference"
        recs = result["records"]
        self.assertNotEmpty(recs)
        self.assertEqual({r["mode"] for r in recs}, {mode})
        self.assertEqual(len(recs), 2 * len({id(r["graph_obj"]) for r in recs}))
        self.assertTrue(all(r["median_ms"] > 0 for r in recs))

    def test_feeds_of_a_walk_graph_come_from_its_origin(self):
        graph = zoo.get_graph("small_cnn")
        steps = gpu_data.greedy_steps(graph)
        final = gpu_data.replay_prefixes(graph, steps, [len(steps)])[len(steps)]
        item = gpu_data.Item("greedy", "small_cnn", "greedy@1", 1, final, origin=graph)
        feeds = gpu_data.feeds_of(item, 0)
        from xflowrl.executor import reference  # pylint: disable=import-outside-toplevel
        want = reference.execute(graph, feeds)
        got = reference.execute(final, feeds)
        for a, b in zip(want, got):
            self.assertTrue(np.all(np.isfinite(b)))
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9)


class CalibrateCudaTest(absltest.TestCase):

    def test_card_names(self):
        self.assertEqual(gpu_calibration.card_name("NVIDIA H200"), "h200")
        self.assertEqual(gpu_calibration.card_name("NVIDIA H100 80GB HBM3"), "h100")
        self.assertEqual(gpu_calibration.card_name("NVIDIA A100-SXM4-80GB"), "a100")
        self.assertEqual(gpu_calibration.card_name("NVIDIA GeForce RTX 4090"), "rtx4090")

    def test_bad_arguments_before_any_device(self):
        with self.assertRaisesRegex(ValueError, "dtype"):
            gpu_calibration.calibrate_cuda(dtype=("int8",))
        with self.assertRaisesRegex(ValueError, "budget"):
            gpu_calibration.calibrate_cuda(budget="huge")
        with self.assertRaisesRegex(ValueError, "batch"):
            gpu_calibration.calibrate_cuda(batch=(0,))

    def test_calibrate_cuda_appends_and_refits(self):
        """The wiring, with the GPU replaced: `cuda_device` names a card and
        `collect` returns timings made from a known linear model."""
        from unittest import mock  # pylint: disable=import-outside-toplevel

        from xflowrl.measure import learned_fit  # pylint: disable=import-outside-toplevel
        graphs = [zoo.get_graph("small_cnn", batch_size=b) for b in (1, 2, 4)]
        graphs += [zoo.get_graph("bert", **dict(zoo.REDUCED["bert"], seq_len=s))
                   for s in (8, 16, 32)]
        x, fixed = learned_fit.design(graphs)
        truth = (learned_fit.tying("tied") @ np.array([0.004, 0.03, 0.02, 0.001])).reshape(
            len(learned_fit.CLASSES), 3)
        times = learned_fit.predict(truth, x, fixed)
        names = ["small_cnn"] * 3 + ["bert"] * 3
        records = [{"source": "zoo", "name": n, "variant": "original", "batch": k % 3 + 1,
                    "dtype": d, "mode": "graph", "median_ms": float(t), "graph_obj": g}
                   for k, (n, g, t) in enumerate(zip(names, graphs, times))
                   for d in ("float32", "bfloat16")]
        folder = tempfile.mkdtemp()
        fake = {"records": records, "versions": {"card": "T9"}, "seconds": 1.0,
                "stopped_at": None, "failed": []}
        with mock.patch.object(gpu_calibration, "cuda_device", return_value="t9"), \
                mock.patch.object(gpu_data, "collect", return_value=fake) as collect:
            result = gpu_calibration.calibrate_cuda(batch=(1, 8), dtype=("float32", "bfloat16"),
                                                    data_dir=folder)
        config = collect.call_args[0][0]
        self.assertEqual((config.batches, config.dtypes), ((1, 8), ("float32", "bfloat16")))
        self.assertEqual(result["card"], "t9")
        self.assertEqual((result["records"], result["records_total"]), (12, 12))
        self.assertEqual(result["path"], os.path.join(folder, "learned_t9.json"))
        self.assertEqual(sorted(result["fit"]), ["bfloat16", "float32"])
        model = CostModel("learned", profile=f"{result['path']}:bf16")
        np.testing.assert_allclose([g.cost(model) for g in graphs], times, rtol=1e-4)
        self.assertIn("calibrate_cuda", gpu_data.read_records(folder, "t9")[0]["command"])

    def test_no_cuda_says_what_is_missing(self):
        try:
            import torch  # pylint: disable=import-outside-toplevel
        except ImportError:
            with self.assertRaisesRegex(gpu_calibration.CudaUnavailable, "not installed"):
                gpu_calibration.calibrate_cuda()
            return
        if torch.cuda.is_available():
            self.skipTest("a CUDA device is visible")
        with self.assertRaisesRegex(gpu_calibration.CudaUnavailable, "no CUDA device"):
            gpu_calibration.calibrate_cuda()


if __name__ == "__main__":
    absltest.main()
