"""The rule files xflowrl ships, as package data (format: docs/rules.md).

- `builtin.json`: the engine's hand-written xfers.
- `generated.json`: the rules xflowrl's generator enumerated, verified and
  pruned (`experiments/generate_rules.py`; docs/generator.md).
- `taso_rules.json`: TASO's shipped collection, converted
  (`experiments/convert_taso_rules.py`).
- `primitive.json`: primitive steps in place of the compound built-in
  enlarge-and-merge: kernel enlargement on its own and the merge of two
  sibling convs with equal kernels.

They are found with `importlib.resources` relative to this package, never
relative to a source checkout, so an installed copy (`pip install .`, a
wheel) finds them from any working directory. `xflowrl.rules.sets` names
the rule sets built from them.
"""

from __future__ import annotations

import importlib.resources
import os

BUILTIN = "builtin.json"
GENERATED = "generated.json"
TASO = "taso_rules.json"
PRIMITIVE = "primitive.json"


def path(name: str) -> str:
    """The file-system path of the shipped rule file `name` (e.g. `BUILTIN`).

    Raises:
      FileNotFoundError: no such file in this package (e.g. the installed
        copy was built without its package data).
    """
    resource = importlib.resources.files(__name__).joinpath(name)
    if not resource.is_file():
        raise FileNotFoundError(f"rule file {name!r} is not in the package {__name__} "
                                f"({resource}); was it installed without its package data?")
    if not isinstance(resource, os.PathLike):  # e.g. a package imported from a zip file
        raise FileNotFoundError(f"rule file {name!r} ({resource}) is not a file on disk")
    return os.fspath(resource)
