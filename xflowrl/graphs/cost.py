"""Cost models: the estimated runtime of a graph, summed over its ops.

Three native backends share one interface (docs/engine.md):

- ``analytic``: a deterministic roofline (FLOPs, bytes moved, kernel launches)
  over a device profile (``cpu``, ``v100``, ``h100``); the default in tests.
- ``onednn``: each op configuration timed once on this CPU with oneDNN,
  single-threaded, median of repeats after warm-up; memoized, and cached on
  disk when ``cache_path`` is given so that runs reproduce.
- ``cudnn``: the same with cuDNN/cuBLAS on GPU 0, where built and available.
"""

from __future__ import annotations

from typing import Optional

from xflowrl import _engine

BACKENDS = ("analytic", "onednn", "cudnn")


class CostModel:
    """One cost backend; op measurements are memoized for its lifetime."""

    def __init__(self, backend: str = "analytic", *, profile: str = "cpu",
                 cache_path: Optional[str] = None, warmup: int = 5,
                 repeats: int = 21):
        """Creates a backend.

        Args:
          backend: one of BACKENDS.
          profile: device profile of the analytic backend.
          cache_path: measured backends: a text file of cached timings.
          warmup: measured backends: untimed runs before timing.
          repeats: measured backends: timed runs; the median is kept.

        Raises:
          ValueError: unknown backend or profile, or a backend not built here.
        """
        if backend == "analytic":
            handle = _engine.analytic_backend(profile)
        elif backend == "onednn":
            handle = _engine.onednn_backend(cache_path or "", warmup, repeats)
        elif backend == "cudnn":
            handle = _engine.cudnn_backend(cache_path or "", warmup, repeats)
        else:
            raise ValueError(f"unknown cost backend {backend!r}; choose from {BACKENDS}")
        self.backend = backend
        self.handle = handle

    @property
    def name(self) -> str:
        return self.handle.name

    def __repr__(self) -> str:
        return f"CostModel({self.name!r})"


def available_backends() -> tuple:
    """The backends this build can construct (a GPU is checked at creation)."""
    names = ["analytic"]
    if _engine.onednn_built():
        names.append("onednn")
    if _engine.cudnn_built():
        names.append("cudnn")
    return tuple(names)
