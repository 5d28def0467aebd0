"""ONNX interop: `load_onnx` (importer.py, with one handler per engine-mapped
operator in ops.py), `to_onnx`/`save_onnx` (exporter.py), the records they
share (common.py) and a mutation fuzzer (fuzz.py); docs/onnx.md. The only
package of the engine side that needs `onnx`.
"""

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from xflowrl.onnx_io.common import ModelInterface, OnnxWeights
    from xflowrl.onnx_io.exporter import save_onnx, to_onnx
    from xflowrl.onnx_io.importer import load_onnx

# Names are imported on first use (PEP 562): importing this package
# loads none of its modules.
_EXPORTS: Dict[str, str] = {
    "ModelInterface": "xflowrl.onnx_io.common",
    "OnnxWeights": "xflowrl.onnx_io.common",
    "save_onnx": "xflowrl.onnx_io.exporter",
    "to_onnx": "xflowrl.onnx_io.exporter",
    "load_onnx": "xflowrl.onnx_io.importer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_EXPORTS))
