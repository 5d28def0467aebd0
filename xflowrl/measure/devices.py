"""Which device a model is checked and timed on: the GPU where there is one.

The `xflowrl` command's `--device` takes one of `DEVICES`:

- "auto" (the default): "cuda" where PyTorch imports and sees a CUDA GPU,
  else "cpu";
- "cpu": onnxruntime on the CPU (one thread), the path that needs no
  PyTorch;
- "cuda": PyTorch on the GPU (`xflowrl.measure.torch_runtime`: CUDA graph
  and eager); an error naming what is missing where PyTorch or a GPU is not
  there;
- "torch-cpu": the GPU path's stand-in, PyTorch on the CPU: the same
  programs, checks and decisions as "cuda", timed eagerly by the wall
  clock; for testing the GPU path on a machine without a GPU, never for
  figures.

Nothing here imports PyTorch at module level: `xflowrl` works without it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from typing import Optional

AUTO, CPU, CUDA, TORCH_CPU = "auto", "cpu", "cuda", "torch-cpu"
DEVICES = (AUTO, CPU, CUDA, TORCH_CPU)
# The devices whose checks and timings run in PyTorch, and the
# `torch_runtime` device each uses.
TORCH_DEVICES = {CUDA: "cuda", TORCH_CPU: "cpu"}
INSTALL_HINT = "pip install xflowrl[gpu]"


class DeviceUnavailable(RuntimeError):
    """The asked-for device cannot be used here; the message says what is
    missing, in one line."""


def _torch_found() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a module set to None, a broken parent
        return False


# What a GPU driver PyTorch could use leaves on Linux: NVIDIA's kernel
# driver, WSL2's GPU device, ROCm's. Without any of them PyTorch sees no
# GPU, and asking it costs its import (seconds) on every run of `xflowrl`.
_GPU_DRIVER_PATHS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def _gpu_driver_missing() -> bool:
    """True on Linux where no GPU driver is loaded (`_GPU_DRIVER_PATHS`);
    False elsewhere (not known without asking PyTorch)."""
    return sys.platform.startswith("linux") and not any(
        os.path.exists(path) for path in _GPU_DRIVER_PATHS)


def cuda_missing() -> Optional[str]:
    """What stops the GPU path here, in one line, or None where PyTorch
    imports and sees a CUDA GPU."""
    if not _torch_found():
        return f"PyTorch is not installed ({INSTALL_HINT})"
    if _gpu_driver_missing():
        return ("PyTorch sees no CUDA GPU: no GPU driver is loaded (none of "
                f"{', '.join(_GPU_DRIVER_PATHS)} exists)")
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except Exception as e:  # a broken install says why  # pylint: disable=broad-except
        return f"PyTorch does not import: {type(e).__name__}: {e}"
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        return (f"PyTorch {torch.__version__} is a CPU-only build (install a CUDA build: "
                f"{INSTALL_HINT} on a machine with a GPU)")
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)"
    return None


def torch_missing() -> Optional[str]:
    """What stops the CPU stand-in of the GPU path, or None."""
    if not _torch_found():
        return f"PyTorch is not installed ({INSTALL_HINT})"
    return None


@dataclasses.dataclass(frozen=True)
class Device:
    """A resolved device.

    Attributes:
      name: "cpu", "cuda" or "torch-cpu" (never "auto").
      asked: what was asked for ("auto" included).
      why: how "auto" chose, or "" where the device was named.
    """
    name: str
    asked: str
    why: str = ""

    @property
    def torch_device(self) -> Optional[str]:
        """The `torch_runtime` device ("cuda" or "cpu"), None for onnxruntime."""
        return TORCH_DEVICES.get(self.name)


def resolve(asked: str = AUTO) -> Device:
    """The device to check and time on (module docstring).

    Raises:
      ValueError: `asked` is not one of `DEVICES`.
      DeviceUnavailable: "cuda" without PyTorch or a GPU, "torch-cpu"
        without PyTorch (the message names what is missing).
    """
    if asked not in DEVICES:
        raise ValueError(f"--device={asked}: choose from {', '.join(DEVICES)}")
    if asked == AUTO:
        missing = cuda_missing()
        if missing is None:
            return Device(CUDA, AUTO, "a CUDA GPU was found")
        return Device(CPU, AUTO, f"no GPU path: {missing}")
    if asked == CUDA:
        missing = cuda_missing()
        if missing is not None:
            raise DeviceUnavailable(f"--device=cuda: {missing}")
    if asked == TORCH_CPU:
        missing = torch_missing()
        if missing is not None:
            raise DeviceUnavailable(f"--device=torch-cpu: {missing}")
    return Device(asked, asked)


def card_name() -> str:
    """The name of CUDA device 0 (PyTorch with a GPU needed)."""
    import torch  # pylint: disable=import-outside-toplevel
    return str(torch.cuda.get_device_name(0))
