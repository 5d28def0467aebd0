"""The named rule sets: which shipped rule files (`xflowrl.rules.files`)
make up each, and the default.

`load_rule_set(name)` reads a set's rules (validated, in file order);
`xflowrl.engine.XferSet.from_name(name)` hands them to the engine.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from xflowrl.rules import files as rule_files
from xflowrl.rules import rules_io

# The shipped rule files (package data of `xflowrl.rules.files`).
BUILTIN_RULES = rule_files.path(rule_files.BUILTIN)
TASO_RULES_JSON = rule_files.path(rule_files.TASO)
GENERATED_RULES = rule_files.path(rule_files.GENERATED)
# Named rule sets (files are loaded in the order listed): "default" = the
# engine's built-ins + the rules xflowrl's generator produced and verified
# (experiments/generate_rules.py); "builtin+taso" = built-ins + TASO's shipped
# collection (the thesis' set); the others are one file alone.
RULE_SETS: Dict[str, Tuple[str, ...]] = {
    "default": (BUILTIN_RULES, GENERATED_RULES),
    "builtin+taso": (BUILTIN_RULES, TASO_RULES_JSON),
    "builtin": (BUILTIN_RULES,),
    "generated": (GENERATED_RULES,),
    "taso": (TASO_RULES_JSON,),
}
# The rule set of every entry point, benchmark and the CLI unless one is named.
DEFAULT_RULE_SET = "default"


def load_rule_set(name: str) -> List[rules_io.Rule]:
    """The rules of a named set (`RULE_SETS`); ValueError for an unknown name."""
    if name not in RULE_SETS:
        raise ValueError(f"unknown rule set {name!r}; choose one of {list(RULE_SETS)}")
    return [r for path in RULE_SETS[name] for r in rules_io.load_rules(path)]


def load_default_rules() -> List[rules_io.Rule]:
    """The rules of `DEFAULT_RULE_SET`."""
    return load_rule_set(DEFAULT_RULE_SET)
