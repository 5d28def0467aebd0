"""GPU timings already committed, as records of the learned model's data.

benchmarks/cudnn_bench.py's reports (docs/data/cudnn_bench_<card>*.json)
hold CUDA-graph and eager times of zoo graphs and corpus graphs and of
their optimised graphs, measured in PyTorch (`TorchProgram`, float32, TF32
on, batch 1) on H100 and H200 cards. The reports keep times, not graphs;
`import_report` rebuilds every graph it can and checks it against what the
report recorded of it before using its times:

- the original: the zoo graph (``graphs``) or the held-out corpus member
  (``generalist``), its analytic/v100 cost equal to the recorded one where
  the report has it;
- greedy's graph under analytic/v100 (`GraphEnv` with the report's L): its
  cost equal to the recorded ``final_ms`` (zoo) or its change equal to the
  recorded ``estimated_change_pct`` (corpus);
- TASO's graph under analytic/v100 (the report's budget and time limit):
  used only where its cost equals the recorded best (a search cut by its
  time limit may end elsewhere on another machine).

Graphs optimised under the cudnn cost model (their choices depend on
kernel timings of that card) and the policies' graphs (their runs'
substitutions are not committed) cannot be rebuilt and are skipped;
`import_report` counts them. Reports of an unfused runtime
(``fuse_conv_relu`` absent or false) time another program and are refused.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from xflowrl.engine import cost as engine_cost
from xflowrl.engine.graph import Graph

Progress = Optional[Callable[[str], None]]
_REL = 1e-9


def _close(a: float, b: float, rel: float = _REL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1.0)


def _change(a: float, b: float) -> float:
    return 100.0 * (b - a) / a


def _record(source: str, name: str, variant: str, graph: Graph, timing: Mapping[str, Any],
            mode: str, report: str, device: str) -> Dict[str, Any]:
    return {"source": source, "name": name, "variant": variant, "batch": 1,
            "dtype": "float32", "mode": mode, "ops": len(graph.ops()),
            "median_ms": float(timing["median_ms"]), "min_ms": float(timing["min_ms"]),
            "max_ms": float(timing["max_ms"]), "graph_obj": graph,
            "versions": {"card": device, "tf32": True, "runtime": "TorchProgram"},
            "imported_from": report}


def import_report(path: str, progress: Progress = None,
                  taso: bool = True) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """The records of one cudnn_bench report (module docstring).

    Args:
      path: the report (.json).
      progress: called with a line per graph.
      taso: rebuild TASO's graphs too (up to the report's time limit each).

    Returns:
      (records with "graph_obj", {"report", "device", "imported": n,
       "skipped": {reason: [graph/variant, ...]}}).

    Raises:
      ValueError: a report of an unfused runtime.
    """
    # pylint: disable=import-outside-toplevel
    from xflowrl import zoo
    from xflowrl.engine import XferSet
    from xflowrl.env import EnvConfig, GraphEnv
    from xflowrl.search.greedy import greedy_walk
    with open(path) as f:
        report = json.load(f)
    if not report.get("fuse_conv_relu"):
        raise ValueError(f"{path}: not a report of the fused runtime (fuse_conv_relu)")
    name_of_report = os.path.basename(path)
    device = str(report.get("device", "unknown"))
    xfers = XferSet.default()
    if report.get("rules") not in (None, len(xfers)):
        raise ValueError(f"{path}: {report['rules']} rules, the default set has {len(xfers)}")
    v100 = engine_cost.cost_model_from_spec("analytic/v100")
    max_locations = int(report.get("max_locations", 200))
    records: List[Dict[str, Any]] = []
    skipped: Dict[str, List[str]] = {}

    def skip(reason: str, what: str) -> None:
        skipped.setdefault(reason, []).append(what)

    def greedy_graph(graph: Graph) -> Tuple[Graph, float]:
        env = GraphEnv(graph, xfers, v100, EnvConfig(max_locations=max_locations))
        walk = greedy_walk(env)
        return walk.graph, walk.cost

    for name, entry in sorted(report.get("graphs", {}).items()):
        graph = zoo.get_graph(name)
        recorded = entry.get("cost_ms", {}).get("analytic_v100")
        if recorded is not None and not _close(graph.cost(v100), recorded):
            skip("original's cost differs", name)
            continue
        built: Dict[str, Graph] = {"original": graph}
        search = entry.get("search", {})
        g_rec = search.get("greedy", {}).get("optimising_analytic_v100", {})
        g_graph, g_cost = greedy_graph(graph)
        if "final_ms" in g_rec and _close(g_cost, g_rec["final_ms"]):
            built["greedy_analytic_v100"] = g_graph
        else:
            skip("greedy's graph differs", f"{name}/greedy_analytic_v100")
        t_rec = search.get("taso", {}).get("optimising_analytic_v100", {})
        if taso and "final_ms" in t_rec:
            result = xfers.search(graph, v100, budget=int(report.get("taso_budget", 100)),
                                  time_limit_s=float(report.get("taso_time_limit_s", 90.0)))
            if _close(result.best_cost, t_rec["final_ms"]):
                built["taso_analytic_v100"] = result.graph
            else:
                skip("TASO's graph differs (time limit)", f"{name}/taso_analytic_v100")
        for variant, timings in sorted(entry.get("runtime", {}).items()):
            if variant not in built:
                if variant not in ("greedy_analytic_v100", "taso_analytic_v100"):
                    skip("not rebuildable (cudnn cost or policy)", f"{name}/{variant}")
                continue
            label = "original" if variant == "original" else variant
            for mode in ("graph", "eager"):
                if mode in timings:
                    records.append(_record("zoo", name, label, built[variant], timings[mode],
                                           mode, name_of_report, device))
        if progress is not None:
            progress(f"{name_of_report}: {name}: {sorted(built)}")
    for run in report.get("generalist", []):
        if run.get("cost_model") != "analytic/v100":
            skip("generalist run under another cost model", str(run.get("cost_model")))
            continue
        from xflowrl import corpus  # pylint: disable=import-outside-toplevel
        specs = {spec.name: spec for spec in corpus.specs("all")}
        for name, entry in sorted(run.get("graphs", {}).items()):
            if name not in specs:
                skip("unknown corpus member", name)
                continue
            graph = specs[name].build()
            g_graph, g_cost = greedy_graph(graph)
            want = entry.get("estimated_change_pct", {}).get("greedy")
            built = {"original": graph}
            if want is not None and _close(_change(graph.cost(v100), g_cost), want, 1e-6):
                built["greedy"] = g_graph
            else:
                skip("greedy's graph differs", f"{name}/greedy")
            for variant, timings in sorted(entry.get("runtime", {}).items()):
                if variant not in built:
                    if variant != "greedy":
                        skip("not rebuildable (cudnn cost or policy)", f"{name}/{variant}")
                    continue
                label = "original" if variant == "original" else "greedy_analytic_v100"
                for mode in ("graph", "eager"):
                    if mode in timings:
                        records.append(_record("corpus", name, label, built[variant],
                                               timings[mode], mode, name_of_report, device))
            if progress is not None:
                progress(f"{name_of_report}: generalist seed {run.get('seed')}: {name}: "
                         f"{sorted(built)}")
    return records, {"report": name_of_report, "device": device,
                     "imported": len(records),
                     "skipped": {k: sorted(set(v)) for k, v in skipped.items()}}
