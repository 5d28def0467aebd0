"""Estimated versus measured gains: optimized graphs timed end to end; prints JSON.

    python benchmarks/runtime_bench.py [--graphs=squeezenet1_1,resnet18,...]
        [--optimize_with=analytic/cpu,fitted/cpu] [--evaluate_with=...]
        [--runtimes=ort,tf] [--rounds=7] [--agent_graphs=results] [--output=x.json]

Per graph, the variants are: the original; for every cost model of
`--optimize_with`, one-step greedy's graph (`greedy_search`, no step limit)
and TASO's search's best graph (`XferSet.search`, `--taso_alpha`,
`--taso_budget`) under that model; with `--agent_graphs=<dir>` (e.g.
`results`), the final graph of every run an experiment saved as
`<dir>/<graph>/<run>/` (train_mf, train_mb), rebuilt by replaying its
substitutions from `result.json` (`agent_variants`).
Every variant runs with the same weights (`random_weights(original,
--seed, gain=zoo.weight_gain(graph))`, finite values for the softmax-free
transformers too; exported by `to_onnx`, weight-side ops precomputed) and
inputs.

Timing: every variant is prepared once per runtime (onnxruntime session:
1 intra-op thread, all graph optimizations, `xflowrl.measure.ort_runtime`;
TensorFlow through onnx-tf: default thread pools, traced function,
`xflowrl.measure.tf_runtime`), then `--rounds` rounds, each running every
variant (in a seeded random order) for `--warmup` untimed and `--repeats`
timed calls; a round yields the median of its calls. Reported per variant:
the median over rounds, the interquartile range and min/max of the round
medians. Graphs with identical hashes are timed once.

Two clocks per call, reported as `<runtime>/wall` and `<runtime>/cpu`: wall
time, and CPU time: of the calling thread for onnxruntime (with one
intra-op thread the whole inference runs there: its compute time, without
the time spent waiting for a core; see `xflowrl.measure.ort_runtime`), of
the whole process for TensorFlow (its two intra-op threads' work, not its
latency). On a shared machine wall times mostly measure the other
processes; the cpu figures are the ones to compare.

Compared with every cost model of `--evaluate_with` (estimated cost of each
variant): predicted change vs measured change of each optimized variant
(percent of the original's time), their gap in percentage points, the
measured speed-up (original / variant, reported also when it is 1.0), and
the Spearman rank correlation between estimated and measured times over all
distinct graphs (originals and optimized variants of every graph).

Cost model names: `analytic/<profile>`, `onednn` (cost cache
`--cost_cache`), `fitted/<profile>`. Run at normal priority on an otherwise
quiet machine; the spread columns say how quiet it was.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
from typing import Dict, List, Optional

from absl import app, flags, logging
import numpy as np

from xflowrl import zoo
from xflowrl.agents.ppo.training import replay
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS, TASO_ALPHA, TASO_BUDGET
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.measure.compare import time_models
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.results.thesis import THESIS_GRAPHS
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.search.greedy import greedy_search

FLAGS = flags.FLAGS
# The thesis' graphs but ViT (the runs in docs/runtime.md).
DEFAULT_GRAPHS = [g for g in THESIS_GRAPHS if g != "vit"]
flags.DEFINE_list("graphs", DEFAULT_GRAPHS, f"Zoo graphs ({zoo.GRAPHS}).")
flags.DEFINE_list("optimize_with", ["analytic/cpu", "fitted/cpu"],
                  "Cost models that produce the greedy and TASO variants.")
flags.DEFINE_list("evaluate_with", ["analytic/cpu", "analytic/v100", "onednn", "fitted/cpu"],
                  "Cost models whose estimates are compared with the measurements.")
flags.DEFINE_list("runtimes", ["ort", "tf"], "ort (onnxruntime) and/or tf (onnx-tf).")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Rule set (XferSet.from_name).")
flags.DEFINE_float("taso_alpha", TASO_ALPHA, "TASO search relaxation.")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "TASO search budget (0: no TASO variants).")
flags.DEFINE_string("agent_graphs", "", "Results folder with <graph>/<run>/graph.onnx files.")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS,
                     "L of the agents' environment (replaying them).")
flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "oneDNN cost cache.")
flags.DEFINE_integer("rounds", 7, "Interleaved timing rounds.")
flags.DEFINE_integer("warmup", 2, "Untimed calls per variant and round.")
flags.DEFINE_integer("repeats", 10, "Timed calls per variant and round.")
flags.DEFINE_integer("seed", 0, "Weights, inputs and round order.")
flags.DEFINE_string("output", "", "Also write the JSON report here.")
flags.DEFINE_string("reestimate_from", "", "Measure nothing: rebuild the variants of an earlier "
                    "report's graphs, estimate them with --evaluate_with and compare with its "
                    "measurements (variants whose graph changed are dropped).")
flags.DEFINE_bool("markdown", False, "Print markdown tables instead of the JSON report.")
flags.DEFINE_list("from_json", [], "Measure nothing: merge the graphs of these earlier reports "
                  "(e.g. one run per graph) and summarize them together.")
flags.DEFINE_list("fixtures", [], "Also these ONNX exporter fixtures of "
                  "tests/onnx_io/exporter_models.py (FIXTURES), imported with load_onnx and "
                  "timed like the zoo graphs (with the fixture's weights).")

FIXTURES = ("hf_bert_torchscript", "torch_dynamo_transformer", "keras_transformer_block")


def fixture_original(name: str, seed: int):
    """An exporter fixture as (engine graph, its weights, feeds): integer
    inputs are token ids below 10 (an `attention_mask` pads its last
    quarter), float inputs N(0, 1)."""
    import sys  # pylint: disable=import-outside-toplevel

    import onnx  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.onnx_io import exporter_models  # pylint: disable=import-outside-toplevel
    if name not in FIXTURES:
        raise ValueError(f"unknown fixture {name!r}; choose from {FIXTURES}")
    model = getattr(exporter_models, name)()
    graph, weights = load_onnx(model)
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 10, dims).astype(np.int64)
            if value.name == "attention_mask":
                feeds[value.name] = np.ones(dims, np.int64)
                feeds[value.name][..., dims[-1] - dims[-1] // 4:] = 0
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return graph, weights, feeds


def original_of(name: str, seed: int):
    """A zoo graph or an exporter fixture: (graph, weights, feeds)."""
    if name in FIXTURES:
        return fixture_original(name, seed)
    original = zoo.get_graph(name)
    return (original, random_weights(original, seed, gain=zoo.weight_gain(name)),
            random_inputs(original, seed))


@dataclasses.dataclass
class Variant:
    """One graph to time: its engine graph (for estimates) and ONNX model."""
    name: str
    graph: Graph
    model: object = None          # onnx.ModelProto
    steps: Optional[int] = None   # substitutions applied
    search_seconds: Optional[float] = None


def optimized_variants(graph: Graph, xfers: XferSet, spec: str, cost_model: CostModel,
                       alpha: float, budget: int) -> List[Variant]:
    """Greedy's and TASO's graphs under one cost model."""
    env = GraphEnv(graph, xfers, cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
    start = time.time()
    episode = greedy_search(env)
    out = [Variant(f"greedy[{spec}]", env.graph, steps=len(episode.applied),
                   search_seconds=time.time() - start)]
    if budget > 0:
        start = time.time()
        result = xfers.search(graph, cost_model, alpha=alpha, budget=budget)
        out.append(Variant(f"taso[{spec}]", result.graph, steps=len(result.applied),
                           search_seconds=time.time() - start))
    return out


APPLIED_KEYS = ("agent_applied", "controller_cheapest_applied")  # train_mf, train_mb


def agent_variants(folder: str, graph_name: str, xfers: XferSet, original: Graph,
                   max_locations: int) -> List[Variant]:
    """The agents' final graphs saved under `<folder>/<graph>/<run>/`.

    The engine graph is rebuilt by replaying the run's substitutions
    (`result.json`: train_mf's `agent_applied`, train_mb's
    `controller_cheapest_applied`) on the original under the run's rules and L
    (`rules`, `max_locations` of its result.json; older runs recorded
    neither: `--rules` and `max_locations` then); the replayed graph is
    exported with this benchmark's weights like every other variant. Where
    there is no sequence or it does not replay, the saved `graph.onnx` is
    imported (`load_onnx`) for the estimates and timed as saved (it carries
    `random_weights(original, seed, gain=zoo.weight_gain(graph))` of the run's seed).
    """
    out = []
    for path in sorted(glob.glob(os.path.join(folder, graph_name, "*", "graph.onnx"))):
        run_dir = os.path.dirname(path)
        run = os.path.basename(run_dir)
        sequence, result = None, {}
        result_path = os.path.join(run_dir, "result.json")
        if os.path.exists(result_path):
            with open(result_path) as f:
                result = json.load(f)
            sequence = next((result[k] for k in APPLIED_KEYS if k in result), None)
        if sequence is not None:
            try:
                run_xfers = XferSet.from_name(result["rules"]) if "rules" in result else xfers
                env = GraphEnv(original, run_xfers, CostModel("analytic"),
                               EnvConfig(max_steps=NO_STEP_LIMIT,
                                         max_locations=result.get("max_locations",
                                                                  max_locations)))
                graph = replay(env, [tuple(s) for s in sequence])
                out.append(Variant(f"agent[{run}]", graph, steps=len(sequence)))
                continue
            except ValueError as e:
                logging.warning("%s: replay failed (%s); importing graph.onnx", run_dir, e)
        import onnx  # pylint: disable=import-outside-toplevel
        model = onnx.load(path)
        graph, _ = load_onnx(model)
        out.append(Variant(f"agent[{run}:onnx]", graph, model=model))
    return out


def ranks(values) -> np.ndarray:
    """Ranks from 1, ties averaged (the Spearman convention)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        tied = values == v
        r[tied] = r[tied].mean()
    return r


def spearman(x, y) -> float:
    """Spearman's rho: Pearson correlation of the ranks (numpy only)."""
    if len(x) < 2:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denom) if denom > 0 else float("nan")


def bench_graph(name: str, xfers: XferSet, optimizers: Dict[str, CostModel],
                evaluators: Dict[str, CostModel], rng: np.random.Generator) -> dict:
    """Variants of one graph, their estimates and interleaved measurements."""
    original, weights, feeds = original_of(name, FLAGS.seed)
    variants = [Variant("original", original)]
    for spec, model in optimizers.items():
        variants += optimized_variants(original, xfers, spec, model, FLAGS.taso_alpha,
                                       FLAGS.taso_budget)
    if FLAGS.agent_graphs:
        variants += agent_variants(FLAGS.agent_graphs, name, xfers, original,
                                   FLAGS.max_locations)
    # One timing per distinct graph: variants with equal hashes share it.
    unique: Dict[str, Variant] = {}
    key_of: Dict[str, str] = {}
    for v in variants:
        key = f"{v.graph.hash():x}" if v.model is None else f"onnx:{v.name}"
        key_of[v.name] = key
        if key not in unique:
            if v.model is None:
                v.model = to_onnx(v.graph, weights, check=False)
            unique[key] = v
    logging.info("%s: timing %d distinct variants in %s", name, len(unique),
                 ", ".join(FLAGS.runtimes))
    measured = time_models({key: v.model for key, v in unique.items()}, feeds, FLAGS.runtimes,
                           FLAGS.rounds, FLAGS.warmup, FLAGS.repeats, rng)
    report = {"ops": original.num_ops(), "variants": {}}
    base_pred = {spec: original.cost(m) for spec, m in evaluators.items()}
    base_meas = measured[key_of["original"]]
    for v in variants:
        pred = {spec: v.graph.cost(m) for spec, m in evaluators.items()}
        meas = measured[key_of[v.name]]
        entry = {
            "graph_key": key_of[v.name], "ops": v.graph.num_ops(), "steps": v.steps,
            "search_seconds": v.search_seconds, "estimated_ms": pred, "measured": meas,
            "predicted_change_pct": {s: 100 * (pred[s] / base_pred[s] - 1) for s in pred},
            "measured_change_pct": {
                rt: 100 * (meas[rt]["median_ms"] / base_meas[rt]["median_ms"] - 1)
                for rt in meas},
            "speedup": {rt: base_meas[rt]["median_ms"] / meas[rt]["median_ms"]
                        for rt in meas},
        }
        entry["gap_pp"] = {rt: {s: abs(entry["predicted_change_pct"][s]
                                       - entry["measured_change_pct"][rt]) for s in pred}
                           for rt in meas}
        report["variants"][v.name] = entry
    return report


def summarize(graphs: Dict[str, dict], specs: List[str], runtimes: List[str]) -> dict:
    """Per runtime ("ort/cpu", "tf/wall", ...) and cost model: Spearman's rho
    between estimated and measured times over the distinct graphs (originals
    and optimized variants of every graph), and per distinct optimized graph
    (variants equal to their original excluded: their gap is 0 by
    construction) the gap |predicted - measured change| in percentage points."""
    out = {}
    for rt in runtimes:
        out[rt] = {}
        for spec in specs:
            est, meas, gaps = [], [], {}
            for gname, g in graphs.items():
                original_key = g["variants"]["original"]["graph_key"]
                names: Dict[str, List[str]] = {}
                first: Dict[str, dict] = {}
                for vname, v in g["variants"].items():
                    names.setdefault(v["graph_key"], []).append(vname)
                    first.setdefault(v["graph_key"], v)
                for key, v in first.items():
                    if rt not in v["measured"]:
                        continue
                    est.append(v["estimated_ms"][spec])
                    meas.append(v["measured"][rt]["median_ms"])
                    if key != original_key:
                        gaps[f"{gname}/{'='.join(names[key])}"] = v["gap_pp"][rt][spec]
            out[rt][spec] = {
                "spearman": spearman(est, meas), "points": len(est),
                "gap_pp_median": float(np.median(list(gaps.values()))) if gaps else None,
                "gap_pp_max": max(gaps.values()) if gaps else None,
                "within_3pp": sum(g <= 3 for g in gaps.values()), "optimized": len(gaps),
                "gap_pp": gaps,
            }
    return out


def markdown(report: dict, runtimes=("ort/cpu", "ort/wall", "tf/cpu", "tf/wall")) -> str:
    """Two tables: every variant's predicted and measured change, and per
    runtime and cost model the Spearman rho and the gaps."""
    specs = list(report["cost_models"])
    lines = ["| graph | variant | steps | " + " | ".join(f"pred. {s}" for s in specs) + " | "
             + " | ".join(f"{rt} ms (IQR)" for rt in runtimes) + " | "
             + " | ".join(f"{rt} change" for rt in runtimes) + " | "
             + " | ".join(f"{rt} speed-up" for rt in runtimes[:1]) + " |",
             "|" + "---|" * (4 + len(specs) + 2 * len(runtimes))]
    for gname, g in report["graphs"].items():
        for vname, v in g["variants"].items():
            pred = " | ".join(f"{v['predicted_change_pct'][s]:+.2f}%" for s in specs)
            ms = " | ".join(
                f"{v['measured'][rt]['median_ms']:.2f} ({v['measured'][rt]['q1_ms']:.2f}-"
                f"{v['measured'][rt]['q3_ms']:.2f})" if rt in v["measured"] else "-"
                for rt in runtimes)
            change = " | ".join(f"{v['measured_change_pct'][rt]:+.2f}%"
                                if rt in v["measured_change_pct"] else "-" for rt in runtimes)
            speedup = (f"{v['speedup'][runtimes[0]]:.3f}" if runtimes[0] in v["speedup"]
                       else "-")
            lines.append(f"| {gname} | {vname} | {v['steps'] if v['steps'] is not None else ''}"
                         f" | {pred} | {ms} | {change} | {speedup} |")
    lines += ["", "| runtime | cost model | Spearman (points) | median gap (pp) | max gap (pp)"
              " | within 3 pp |", "|---|---|---|---|---|---|"]
    for rt in runtimes:
        for spec in specs:
            m = report["summary"].get(rt, {}).get(spec)
            if not m:
                continue
            gap = (f"{m['gap_pp_median']:.2f} | {m['gap_pp_max']:.2f}"
                   if m["optimized"] else "- | -")
            lines.append(f"| {rt} | {spec} | {m['spearman']:.3f} ({m['points']}) | {gap} | "
                         f"{m['within_3pp']}/{m['optimized']} |")
    # Per graph, in the first runtime: the same figures over its own variants.
    rt = runtimes[0]
    lines += ["", f"Per graph ({rt}): Spearman (points), within 3 pp, largest gap (pp)", "",
              "| graph | " + " | ".join(specs) + " |", "|---|" + "---|" * len(specs)]
    for gname, g in report["graphs"].items():
        if not any(rt in v["measured"] for v in g["variants"].values()):
            continue
        per = summarize({gname: g}, specs, [rt])[rt]
        cells = []
        for spec in specs:
            m = per[spec]
            gap = f"{m['gap_pp_max']:.2f}" if m["optimized"] else "-"
            cells.append(f"{m['spearman']:.2f} ({m['points']}), {m['within_3pp']}/"
                         f"{m['optimized']}, {gap}")
        lines.append(f"| {gname} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def merge_reports(paths: List[str]) -> dict:
    """One report over the graphs of several (their configs must agree on
    the cost models evaluated and the runtimes)."""
    reports = []
    for path in paths:
        with open(path) as f:
            reports.append(json.load(f))
    specs = reports[0]["config"]["evaluate_with"] + reports[0]["config"]["optimize_with"]
    specs = list(dict.fromkeys(specs))
    graphs, configs = {}, []
    for r in reports:
        missing = set(specs) - set(r["cost_models"])
        if missing:
            raise ValueError(f"a report lacks the cost models {sorted(missing)}")
        graphs.update(r["graphs"])
        configs.append(r["config"])
    runtimes = [f"{rt}/{clock}" for rt in reports[0]["config"]["runtimes"]
                for clock in ("cpu", "wall")]
    return {"config": configs, "cost_models": reports[0]["cost_models"], "graphs": graphs,
            "summary": summarize(graphs, specs, runtimes)}


def reestimate(path: str, specs: List[str]) -> dict:
    """An earlier report's measurements against new estimates (see
    --reestimate_from): the variants are rebuilt as `bench_graph` builds
    them and matched to the stored ones by graph hash."""
    with open(path) as f:
        earlier = json.load(f)
    config = earlier["config"] if isinstance(earlier["config"], dict) else earlier["config"][0]
    xfers = XferSet.from_name(config["rules"])
    models = {spec: cost_model_from_spec(spec, FLAGS.cost_cache) for spec in specs}
    graphs = {}
    for name, stored in earlier["graphs"].items():
        original = original_of(name, config["seed"])[0]
        variants = [Variant("original", original)]
        for spec in config["optimize_with"]:
            variants += optimized_variants(original, xfers, spec,
                                           cost_model_from_spec(spec, FLAGS.cost_cache),
                                           config["taso_alpha"], config["taso_budget"])
        if config.get("agent_graphs"):
            variants += agent_variants(config["agent_graphs"], name, xfers, original,
                                       FLAGS.max_locations)
        base_pred = {s: original.cost(m) for s, m in models.items()}
        out = {"ops": stored["ops"], "variants": {}}
        for v in variants:
            old = stored["variants"].get(v.name)
            if old is None or (v.model is None and old["graph_key"] != f"{v.graph.hash():x}"):
                continue
            pred = {s: v.graph.cost(m) for s, m in models.items()}
            entry = dict(old, estimated_ms=pred,
                         predicted_change_pct={s: 100 * (pred[s] / base_pred[s] - 1)
                                               for s in pred})
            entry["gap_pp"] = {rt: {s: abs(entry["predicted_change_pct"][s]
                                           - old["measured_change_pct"][rt]) for s in pred}
                               for rt in old["measured_change_pct"]}
            out["variants"][v.name] = entry
        if "original" not in out["variants"]:
            # keras_transformer_block: tf2onnx does not build the same graph
            # in every process, so its stored variants cannot be matched.
            logging.warning("%s: the original no longer matches the report; skipped", name)
            continue
        graphs[name] = out
    runtimes = sorted({rt for g in graphs.values() for v in g["variants"].values()
                       for rt in v["measured"]})
    return {"config": config, "reestimated_with": {s: m.name for s, m in models.items()},
            "cost_models": {s: m.name for s, m in models.items()}, "graphs": graphs,
            "summary": summarize(graphs, specs, runtimes)}


def main(argv):
    del argv
    if FLAGS.reestimate_from:
        report = reestimate(FLAGS.reestimate_from, FLAGS.evaluate_with)
        print(markdown(report) if FLAGS.markdown else json.dumps(report, indent=1))
        return
    if FLAGS.from_json:
        report = merge_reports(FLAGS.from_json)
        text = json.dumps(report, indent=1)
        if FLAGS.output:
            with open(FLAGS.output, "w") as f:
                f.write(text)
        print(markdown(report) if FLAGS.markdown else text)
        return
    xfers = XferSet.from_name(FLAGS.rules)
    specs = list(dict.fromkeys(FLAGS.evaluate_with + FLAGS.optimize_with))
    models = {spec: cost_model_from_spec(spec, FLAGS.cost_cache) for spec in specs}
    optimizers = {spec: models[spec] for spec in FLAGS.optimize_with}
    rng = np.random.default_rng(FLAGS.seed)
    graphs = {}
    for name in FLAGS.graphs + FLAGS.fixtures:
        start = time.time()
        graphs[name] = bench_graph(name, xfers, optimizers, models, rng)
        logging.info("%s done in %.0f s", name, time.time() - start)
    report = {
        "config": {k: FLAGS[k].value for k in (
            "graphs", "fixtures", "optimize_with", "evaluate_with", "runtimes", "rules",
            "taso_alpha", "taso_budget", "agent_graphs", "rounds", "warmup", "repeats", "seed")},
        "cost_models": {spec: m.name for spec, m in models.items()},
        "graphs": graphs,
        "summary": summarize(graphs, specs, [f"{rt}/{clock}" for rt in FLAGS.runtimes
                                             for clock in ("cpu", "wall")]),
    }
    text = json.dumps(report, indent=1)
    if FLAGS.output:
        os.makedirs(os.path.dirname(FLAGS.output) or ".", exist_ok=True)
        with open(FLAGS.output, "w") as f:
            f.write(text)
    print(markdown(report) if FLAGS.markdown else text)


if __name__ == "__main__":
    app.run(main)
