"""Calibrates the learned GPU cost model on this machine's GPU: `calibrate_cuda`.

The library side of `xflowrl calibrate --device=cuda` (docs/runtime.md,
"The learned GPU cost model"). It times the data set of
`xflowrl.measure.gpu_data` (zoo and corpus graphs, graphs along random and
greedy rewrite walks, per-op micro-benchmarks) end to end on the user's
CUDA GPU in PyTorch (CUDA-graph replay, `xflowrl.measure.gpu_data`), appends
the timings to the card's data file (``xflowrl/engine/data/gpu_times/<card>.jsonl``
or `data_dir`), and refits the card's coefficients
(`xflowrl.measure.learned_fit.fit_card`), which
``CostModel("learned/<card>")`` then loads.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional, Sequence

from xflowrl.engine import cost as engine_cost

Progress = Optional[Callable[[str], None]]

DTYPES = ("float32", "bfloat16", "float16")
BUDGETS = ("quick", "full")


class CudaUnavailable(RuntimeError):
    """PyTorch is not installed, or it sees no CUDA device: the message says which."""


def cuda_device() -> str:
    """The card name of CUDA device 0 as the data files name it (`card_name`).

    Raises:
      CudaUnavailable: no PyTorch, or no CUDA device visible to it.
    """
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise CudaUnavailable("PyTorch is not installed (pip install xflowrl[gpu])") from e
    if not torch.cuda.is_available():
        raise CudaUnavailable("no CUDA device is visible to PyTorch")
    return card_name(torch.cuda.get_device_name(0))


def card_name(device_name: str) -> str:
    """A card's short name from the device name CUDA reports, lower case:
    "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100",
    "NVIDIA GeForce RTX 4090" -> "rtx4090"; anything else: its words joined
    by "_" (letters, digits)."""
    words = [w for w in device_name.replace("-", " ").split()
             if w.upper() not in ("NVIDIA", "GEFORCE", "TESLA")]
    words = [w for w in words if not (w.upper().endswith("GB") and w[:-2].isdigit())]
    words = [w for w in words if w.upper() not in ("HBM3", "HBM3E", "HBM2", "HBM2E",
                                                    "PCIE", "SXM", "SXM2", "SXM4", "SXM5", "NVL")]
    if not words:
        return "gpu"
    if words[0].upper() == "RTX" and len(words) > 1:
        words = [words[0] + words[1]] + words[2:]
    name = "_".join(words[:1] if len(words[0]) > 2 else words[:2]).lower()
    return "".join(ch for ch in name if ch.isalnum() or ch == "_") or "gpu"


def calibrate_cuda(output: Optional[str] = None, *, batch: Sequence[int] = (1, 8, 32),
                   dtype: Sequence[str] = ("float32", "bfloat16"), budget: str = "quick",
                   progress: Progress = None, data_dir: Optional[str] = None,
                   seed: int = 0) -> dict:
    """Times the learned model's data set on this GPU, appends it, refits.

    Where the card already has data (the shipped ``h100``, ``h200``), the
    new timings join it; either way the card's coefficient file is rewritten
    from all of its data, atomically.

    Args:
      output: where the fitted profile goes (a .json path); default
        ``learned_<card>.json`` in `data_dir` (then ``learned/<card>`` finds
        it when `data_dir` is the package's data folder).
      batch: the batch sizes to time at (transformers: sequence lengths
        scale with them as `xflowrl.measure.gpu_data` says).
      dtype: the precisions to time in, each of `DTYPES`.
      budget: "quick" (about 3 minutes on an H100: zoo graphs, a few walks,
        a small micro grid) or "full" (about 8 minutes: corpus graphs and
        longer walks too).
      progress: called with one line of text at each stage.
      data_dir: the folder of the data files (``<card>.jsonl``, graphs) and
        the profile; default the package's ``xflowrl/engine/data/gpu_times``
        (profiles in ``xflowrl/engine/data``). Point it elsewhere where the
        package is not writable.
      seed: the walks, weights and inputs.

    Returns:
      {"card", "path" (the profile written), "data" (the data file),
       "records" (timings appended), "records_total", "seconds",
       "versions" (card, driver, CUDA, cuDNN, PyTorch),
       "fit" (per dtype the fit's statistics: graphs, median relative error)}.

    Raises:
      CudaUnavailable: no PyTorch, or no CUDA device (message: what is missing).
      ValueError: an unknown budget or dtype, or an empty batch list.
    """
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; choose from {BUDGETS}")
    bad = [d for d in dtype if d not in DTYPES]
    if bad or not dtype:
        raise ValueError(f"dtype must be among {DTYPES}, got {list(dtype)}")
    if not batch or any(int(b) < 1 for b in batch):
        raise ValueError(f"batch sizes must be positive, got {list(batch)}")
    card = cuda_device()
    # pylint: disable=import-outside-toplevel
    from xflowrl.measure import gpu_data, learned_fit
    start = time.time()
    folder = data_dir or gpu_data.DATA_DIR
    config = gpu_data.CollectConfig(batches=tuple(int(b) for b in batch),
                                    dtypes=tuple(dtype), budget=budget, seed=seed)
    collected = gpu_data.collect(config, progress=progress)
    command = (f"xflowrl.measure.gpu_calibration.calibrate_cuda(batch={list(batch)}, "
               f"dtype={list(dtype)}, budget={budget!r}, seed={seed})")
    appended = gpu_data.append_records(folder, card, collected["records"], command=command)
    profile_path = output or os.path.join(
        folder if data_dir else engine_cost.PROFILES_DIR, f"learned_{card}.json")
    fit = learned_fit.fit_card(card, data_dir=folder, output=profile_path, progress=progress)
    return {"card": card, "path": profile_path, "data": appended["path"],
            "records": appended["appended"], "records_total": appended["total"],
            "seconds": time.time() - start, "versions": collected["versions"],
            "fit": fit["dtypes"]}
