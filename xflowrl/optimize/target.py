"""The target of `xflowrl optimize`: the device that checks and times, the
cost model it optimises for and the precision that cost model prices in.

- `resolve_device`: the device `--device` names (`xflowrl.measure.devices`:
  the GPU where PyTorch sees one, else the CPU); `check_options` refuses a
  precision, timing mode or batch the device cannot take.
- `default_cost_model`: the CPU's is fitted to onnxruntime on this kind of
  CPU; a GPU's is the cost model learned on the user's card where the engine
  has one (`learned/<card>`), else the analytic GPU profile.
- `priced_cost_model`: a learned GPU cost model prices in the asked
  precision where its profile has coefficients for it, else in its default
  precision, and says which (`cost_spec_for_dtype`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

from xflowrl.engine import cost
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.measure import devices
from xflowrl.optimize.model_io import BadInput

if TYPE_CHECKING:
    from xflowrl.optimize.pipeline import OptimizeOptions

# The cost model a CPU target optimises for by default, and a GPU target's
# where no cost model learned on the user's card is there
# (`default_cost_model`).
DEFAULT_COST_MODEL = "fitted/cpu"
DEFAULT_GPU_COST_MODEL = GPU_COST_SPEC
# The precisions a GPU target runs in (`xflowrl.measure.torch_runtime.DTYPES`).
DTYPES = ("float32", "bfloat16", "float16")


def default_cost_model(device: str) -> str:
    """The cost model a target device optimises for unless one is given.

    The CPU: `DEFAULT_COST_MODEL` (fitted to onnxruntime on this kind of
    CPU). A GPU target ("cuda", and its stand-in "torch-cpu"): the cost
    model learned on the user's card, `learned/<card>`, where the engine has
    one (`learned_for_card`), else `DEFAULT_GPU_COST_MODEL` (the analytic
    GPU profile).
    """
    if device == devices.CPU:
        return DEFAULT_COST_MODEL
    if device == devices.CUDA:
        learned = learned_for_card()
        if learned:
            return learned
    return DEFAULT_GPU_COST_MODEL


def learned_for_card() -> str:
    """`learned/<card>` where `xflowrl.engine.cost` has a learned GPU cost
    model for the card PyTorch sees (its short name as
    `xflowrl.measure.gpu_calibration.card_name` writes it), else ""."""
    from xflowrl.measure import gpu_calibration  # pylint: disable=import-outside-toplevel
    try:
        short = gpu_calibration.card_name(devices.card_name())
    except Exception:  # no card to name is no learned default, not an error  # pylint: disable=broad-except
        return ""
    return f"learned/{short}" if short in cost.learned_cards() else ""


def cost_spec_for_dtype(spec: str, dtype: str) -> Tuple[str, str]:
    """(the cost model spec, the precision it prices in, in words): a learned
    GPU cost model that names no precision prices in `dtype`
    (`learned/<card>:<dtype>`); the others take no precision."""
    backend, _, profile = spec.partition("/")
    if backend != "learned":
        return spec, f"float32 ({backend} takes no precision)"
    if profile and ":" not in profile:
        return f"{spec}:{dtype}", dtype
    try:
        return spec, (cost.parse_learned_profile(profile)[1] if profile
                      else "the learned default")
    except ValueError:
        return spec, "unknown"


def resolve_device(options: "OptimizeOptions", runtime) -> devices.Device:
    """The target device `options.device` names (a given `runtime`: its
    device), as `xflowrl.measure.devices.resolve` finds it.

    Raises:
      BadInput: the device asked for is not here.
    """
    if runtime is not None:
        name = devices.CUDA if runtime.device == "cuda" else devices.TORCH_CPU
        return devices.Device(name, options.device, "a runtime was given")
    try:
        return devices.resolve(options.device)
    except (ValueError, devices.DeviceUnavailable) as e:
        raise BadInput(str(e)) from None


def check_options(options: "OptimizeOptions", device: devices.Device) -> None:
    """Refuses (`BadInput`) a precision, timing mode or batch the target
    cannot take."""
    if options.dtype not in DTYPES:
        raise BadInput(f"--dtype={options.dtype}: choose from {', '.join(DTYPES)}")
    if options.dtype != "float32" and device.torch_device is None:
        raise BadInput(f"--dtype={options.dtype}: the CPU target (onnxruntime) runs the "
                       f"model's float32 only; {options.dtype} needs the GPU target "
                       f"(--device=cuda)" + (f" ({device.why})" if device.why else ""))
    if options.timing_mode and options.timing_mode not in ("graph", "eager"):
        raise BadInput(f"--timing={options.timing_mode}: choose graph or eager")
    if options.timing_mode and device.torch_device is None:
        raise BadInput(f"--timing={options.timing_mode}: a GPU target's timing; the CPU "
                       f"target times in onnxruntime")
    if options.timing_mode == "graph" and device.torch_device == "cpu":
        raise BadInput("--timing=graph: CUDA-graph replay needs --device=cuda")
    if options.batch < 0:
        raise BadInput(f"--batch={options.batch}: the batch is a positive integer")


def priced_cost_model(spec: str, dtype: str, make):
    """(the cost model of `spec` priced in `dtype` where it can be, the
    precision it prices in, in words): `cost_spec_for_dtype`; a learned
    profile without coefficients for `dtype` prices in its own default
    precision, and the words say so.

    Raises:
      BadInput: the cost model cannot be made.
    """
    priced, how = cost_spec_for_dtype(spec, dtype)
    if priced != spec:
        try:
            return make(priced), how
        except (ValueError, RuntimeError) as e:
            model = cost_model(spec, make)
            return model, f"the learned profile's default precision ({e})"
    return cost_model(spec, make), how


def cost_model(spec: str, make):
    """`make(spec)`; `BadInput` naming the spec where it cannot be made."""
    try:
        return make(spec)
    except (ValueError, RuntimeError) as e:
        raise BadInput(f"--cost_model={spec}: {e}") from None
