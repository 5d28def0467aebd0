"""Lazy package exports (PEP 562), shared by the packages whose `__init__`
re-exports names of their modules: importing the package loads none of
them, so e.g. `xflowrl.engine` imports without ONNX or TensorFlow, and a
module is loaded when one of its names is first used."""

import importlib
from typing import Any, Callable, Dict, List, Mapping, Tuple


def lazy_exports(package: str, exports: Mapping[str, str], namespace: Dict[str, Any]
                 ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`.

    Args:
      package: the package's `__name__` (for error messages).
      exports: public name -> the module that defines it.
      namespace: the package's `globals()`; a name is cached there on first
        use, so later lookups skip `__getattr__`.
    """
    def __getattr__(name: str) -> Any:
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> List[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
