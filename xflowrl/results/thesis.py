"""The thesis' own figures (Chapter 4; arXiv 2205.01435), defined once:
the graphs it evaluates and the numbers its tables and figures report,
which our tables and figures show beside ours."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

# The graphs of the thesis' Chapter 4.
THESIS_GRAPHS: Tuple[str, ...] = ("squeezenet1_1", "resnet18", "resnet50", "inception_v3",
                                  "bert", "vit")

# Mean inference ms on its GPU (RTX 2070): TF, TensorRT, TASO, model-free, model-based.
THESIS_MS: Dict[str, Dict[str, float]] = {
    "squeezenet1_1": {"tf": 4.83, "trt": 3.85, "taso": 3.68, "mf": 3.72, "mb": 3.98},
    "resnet18": {"tf": 12.55, "trt": 10.71, "taso": 11.39, "mf": 11.62, "mb": 11.90},
    "resnet50": {"tf": 26.07, "trt": 21.89, "taso": 24.61, "mf": 25.96, "mb": 26.48},
    "inception_v3": {"tf": 20.14, "trt": 15.93, "taso": 15.85, "mf": 16.50, "mb": 16.69},
    "bert": {"tf": 4.41, "trt": 3.81, "taso": 3.06, "mf": 3.01, "mb": 2.98},
    "vit": {"tf": 3.81, "trt": 3.42, "taso": 2.84, "mf": 2.83, "mb": 2.64},
}
# The baselines' columns of THESIS_MS (TF, TensorRT, TASO's graph).
BASELINE_KEYS = ("tf", "trt", "taso")

# Table 4.2: baseline TF inference ms, memory GiB, % improvement of the model-based agent.
THESIS_TABLE_4_2: Dict[str, Tuple[float, float, float]] = {
    "resnet18": (12.2, 1.18, 3.0), "resnet50": (26.7, 2.34, 1.0),
    "inception_v3": (17.6, 2.11, 12.5), "squeezenet1_1": (4.6, 1.14, 18.9),
    "bert": (4.1, 0.26, 54.1),
}
# Table 4.3 (BERT, 5 runs): temperature -> (world-model score, std, real score, std), %.
THESIS_TABLE_4_3: Dict[float, Tuple[float, float, float, float]] = {
    0.1: (-6.67, 0.6, -43.92, 5.1), 0.5: (-7.75, 0.3, -55.33, 6.7),
    0.75: (-9.10, 0.4, -55.80, 5.2), 1.0: (-8.85, 1.2, -55.78, 8.0),
    1.2: (-9.91, 0.8, -57.01, 4.8), 1.5: (-8.37, 0.6, -58.23, 5.2),
    1.75: (-9.92, 1.0, -52.07, 6.8), 2.0: (-9.65, 0.8, -46.12, 5.9),
    2.5: (-10.04, 2.0, -41.14, 12.2), 3.0: (-10.38, 1.9, -51.32, 7.2),
}
THESIS_STEPS = {"model_free": 4_000_000, "model_based": 1_000_000}
# Optimisation time, s: TASO's search vs a trained policy (2019 xflowrl, GTX 780).
THESIS_OPT_SECONDS: Dict[str, Tuple[float, float]] = {
    "bert": (29.66, 6.28), "squeezenet1_1": (29.58, 7.95), "resnet18": (9.25, 3.77),
    "resnet50": (1008.49, 104.98)}


def thesis_baseline_ms(graph: str) -> Optional[Dict[str, float]]:
    """The thesis' GPU ms of `graph`'s baselines (TF, TensorRT, TASO), None
    for a graph it did not evaluate."""
    ms = THESIS_MS.get(graph)
    return None if ms is None else {k: ms[k] for k in BASELINE_KEYS}
