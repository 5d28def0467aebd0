"""Table 4.1 of the thesis: the properties of the evaluation graphs."""

from __future__ import annotations

from typing import Any, Dict, List

from xflowrl import zoo
from xflowrl.engine import CostModel
from xflowrl.measure.tf_runtime import measure_graph

_GIB = 2.0 ** 30


def graph_properties(name: str, cost_model: CostModel, *, warmup: int = 3,
                     repeats: int = 10, seed: int = 0) -> Dict[str, Any]:
    """One row of Table 4.1 for zoo graph `name` (random weights and input).

    Returns:
      graph, type, ops (compute ops), estimated cost (ms, `cost_model`),
      TF inference time (median ms), memory: allocator peak, weights
      (float32) and activation peak (see `xflowrl.measure.tf_runtime`).
    """
    graph = zoo.get_graph(name)
    from xflowrl.executor.weights import random_weights  # pylint: disable=g-import-not-at-top
    weights = random_weights(graph, seed, gain=zoo.weight_gain(name))
    m = measure_graph(graph, weights, seed=seed, warmup=warmup, repeats=repeats)
    weight_bytes = sum(v.nbytes for v in weights.values())
    activation_bytes = m.activation_peak_bytes
    return {
        "graph": name,
        "type": zoo.kind(name).capitalize(),
        "ops": graph.num_ops(),
        "cost_model": cost_model.name,
        "estimated_cost_ms": graph.cost(cost_model),
        "tf_inference_ms": m.median_ms,
        "tf_times_ms": m.times_ms,
        "memory_peak_gib": None if m.peak_bytes is None else m.peak_bytes / _GIB,
        "weights_gib": weight_bytes / _GIB,
        "activation_peak_gib": (None if activation_bytes is None
                                else activation_bytes / _GIB),
    }


def markdown_table(rows: List[Dict[str, Any]]) -> str:
    """Table 4.1 as markdown."""
    def gib(v):
        return "n/a" if v is None else f"{v:.3f}"
    lines = ["| graph | type | ops | estimated cost (ms) | TF inference (ms) | memory peak "
             "(GiB) | weights (GiB) | activation peak (GiB) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['type']} | {r['ops']} | "
                     f"{r['estimated_cost_ms']:.2f} | {r['tf_inference_ms']:.1f} | "
                     f"{gib(r['memory_peak_gib'])} | {gib(r['weights_gib'])} | "
                     f"{gib(r['activation_peak_gib'])} |")
    return "\n".join(lines) + "\n"
