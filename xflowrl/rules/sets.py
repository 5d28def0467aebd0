"""The named rule sets: which shipped rule files (`xflowrl.rules.files`)
make up each, and the default.

`load_rule_set(name)` reads a set's rules (validated, in file order);
`xflowrl.engine.XferSet.from_name(name)` hands them to the engine.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple

from xflowrl.rules import files as rule_files
from xflowrl.rules import rules_io

# The shipped rule files (package data of `xflowrl.rules.files`).
BUILTIN_RULES = rule_files.path(rule_files.BUILTIN)
TASO_RULES_JSON = rule_files.path(rule_files.TASO)
GENERATED_RULES = rule_files.path(rule_files.GENERATED)
PRIMITIVE_RULES = rule_files.path(rule_files.PRIMITIVE)


class RuleSource(NamedTuple):
    """The rules a set takes from one file: all of them, or those whose
    names start with a prefix in `only`, less those with a prefix in `drop`
    and those that introduce an op of a type in `drop_introducing` (their
    target has one, their source none)."""
    path: str
    only: Tuple[str, ...] = ()
    drop: Tuple[str, ...] = ()
    drop_introducing: Tuple[str, ...] = ()

    def select(self, rules: List[rules_io.Rule]) -> List[rules_io.Rule]:
        return [r for r in rules
                if (not self.only or r.name.startswith(self.only))
                and not r.name.startswith(self.drop)
                and not any(_introduces(r, t) for t in self.drop_introducing)]


def _introduces(rule: rules_io.Rule, op_type: str) -> bool:
    return (any(op.type == op_type for op in rule.dst)
            and not any(op.type == op_type for op in rule.src))


# The compound built-in that enlarges a kernel and merges two convs in one
# step; the "primitive" set has its two steps (primitive.json) instead.
COMPOUND_BUILTINS = ("enlarge_merge_convs_",)

# Named rule sets (sources are loaded in the order listed): "default" = the
# engine's built-ins + the rules xflowrl's generator produced and verified
# (experiments/generate_rules.py); "builtin+taso" = built-ins + TASO's shipped
# collection (the thesis' set); "tensat" = TASO's collection + the xfers
# TENSAT adds to it (the group-conv merges of the built-ins; kernel
# enlargement and the sibling-conv merge as separate steps, of which TASO's
# taso_127 already is the merge without activation); "primitive" = "default"
# with every compound that enlarges a kernel in the same step as it merges
# (the built-in and the five generated rules whose target introduces an
# `enlarge`) replaced by the two steps; "tensat_full" = "tensat" with the
# rest of TASO's hand-written xfers (the conv+ReLU fusions, the conv+BN
# folds and the bias-add+ReLU fusion that completes a fold), every one of
# TASO's hand-written xfers in its primitive form; the others are one file
# alone (docs/rules.md).
RULE_SETS: Dict[str, Tuple[RuleSource, ...]] = {
    "default": (RuleSource(BUILTIN_RULES), RuleSource(GENERATED_RULES)),
    "builtin+taso": (RuleSource(BUILTIN_RULES), RuleSource(TASO_RULES_JSON)),
    "builtin": (RuleSource(BUILTIN_RULES),),
    "generated": (RuleSource(GENERATED_RULES),),
    "taso": (RuleSource(TASO_RULES_JSON),),
    "tensat": (RuleSource(TASO_RULES_JSON),
               RuleSource(BUILTIN_RULES, only=("merge_gconv_",)),
               RuleSource(PRIMITIVE_RULES, drop=("merge_convs_s1_same_none",))),
    "tensat_full": (RuleSource(TASO_RULES_JSON),
                    RuleSource(BUILTIN_RULES, drop=COMPOUND_BUILTINS),
                    RuleSource(PRIMITIVE_RULES, drop=("merge_convs_s1_same_none",))),
    "primitive": (RuleSource(BUILTIN_RULES, drop=COMPOUND_BUILTINS),
                  RuleSource(PRIMITIVE_RULES),
                  RuleSource(GENERATED_RULES, drop_introducing=("enlarge",))),
}
# The rule set of every entry point, benchmark and the CLI unless one is named.
DEFAULT_RULE_SET = "default"


def load_rule_set(name: str) -> List[rules_io.Rule]:
    """The rules of a named set (`RULE_SETS`); ValueError for an unknown name."""
    if name not in RULE_SETS:
        raise ValueError(f"unknown rule set {name!r}; choose one of {list(RULE_SETS)}")
    return [r for source in RULE_SETS[name]
            for r in source.select(rules_io.load_rules(source.path))]


def load_default_rules() -> List[rules_io.Rule]:
    """The rules of `DEFAULT_RULE_SET`."""
    return load_rule_set(DEFAULT_RULE_SET)
