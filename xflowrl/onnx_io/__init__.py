"""ONNX interop: `load_onnx` (importer.py, with one handler per engine-mapped
operator in ops.py), `to_onnx`/`save_onnx` (exporter.py), the records they
share (common.py) and a mutation fuzzer (fuzz.py); docs/onnx.md. The only
package of the engine side that needs `onnx`.
"""

from typing import Dict, TYPE_CHECKING

from xflowrl._lazy import lazy_exports

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
