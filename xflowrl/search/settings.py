"""The settings where looking ahead pays: a named, versioned list.

A setting is a graph, a rule set and a cost model (and a batch size) on
which the best method known here (TASO's search, equality saturation or a
random descent) ends at least `GAP_THRESHOLD` points of the initial cost
below one-step greedy: where an optimiser that plans can show more than
greedy. The list is measured, not assumed: `experiments/lookahead_settings.py`
writes it from a run of `benchmarks/search_bench.py` into the package data
(`data/lookahead_settings.json`, with the commit, command and date of that
run), and every experiment and benchmark reads it from here
(`load_settings`, `get_setting`); nobody re-types it.

    from xflowrl.search.settings import load_settings
    for s in load_settings():
        print(s.name, s.gap_pct, s.best_methods)

Each setting also carries, where it was measured, one-step greedy's cost
with identical ops merged in the input and after every step
(`greedy_merging_ms`, `xflowrl.engine.dedupe`): what equality saturation
gets for free from storing each e-node once and a method that steps from
graph to graph lacks. `gap_is_merging` says where that alone reaches the
best known cost (on nasnet_a the whole of equality saturation's gain).

Names are `graph/rules/cost model` with the cost model's slash written as
a dash, and `@bN` for a batch other than 1:
`squeezenet1_1/generated/analytic-v100`.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, TYPE_CHECKING, Tuple

if TYPE_CHECKING:  # the environment is built on demand (`LookaheadSetting.environment`)
    from xflowrl.env import GraphEnv

# The format of the list; `load_settings` refuses any other.
SETTINGS_VERSION = 2
# Points of the initial cost by which the best known method must beat greedy.
GAP_THRESHOLD = 1.0
# The methods of a benchmark row whose costs a setting keeps.
METHODS = ("greedy", "taso", "eqsat", "random")
_FILE = "lookahead_settings.json"


@dataclasses.dataclass(frozen=True)
class LookaheadSetting:
    """One setting and what each method reached on it (ms; a method absent
    from `costs_ms` did not run)."""
    graph: str
    rules: str
    cost_model: str              # "backend/profile", e.g. "analytic/v100"
    batch: int
    initial_ms: float
    costs_ms: Dict[str, float]   # method -> the cost it ended at
    best_methods: Tuple[str, ...]
    gap_pct: float               # 100 * (greedy - best) / initial
    gpu: Optional[Dict[str, Any]] = None  # measured on a GPU, where one was lent
    greedy_merging_ms: Optional[float] = None  # greedy, identical ops merged each step

    @property
    def name(self) -> str:
        batch = f"@b{self.batch}" if self.batch != 1 else ""
        return f"{self.graph}/{self.rules}/{self.cost_model.replace('/', '-')}{batch}"

    @property
    def best_ms(self) -> float:
        return min(self.costs_ms.values())

    def change_pct(self, method: str) -> float:
        """A method's cost change, in % of the initial cost."""
        return 100.0 * (self.costs_ms[method] / self.initial_ms - 1.0)

    @property
    def greedy_merging_pct(self) -> Optional[float]:
        """Greedy's change with identical ops merged after every step, in %
        of the initial cost (None where not measured)."""
        if self.greedy_merging_ms is None:
            return None
        return 100.0 * (self.greedy_merging_ms / self.initial_ms - 1.0)

    def environment(self) -> "GraphEnv":
        """The setting's zoo graph at its batch, under its rules and cost
        model, without a step limit: the environment its benchmark rows
        (and every planner benchmark over the list) ran in."""
        # pylint: disable=import-outside-toplevel
        from xflowrl.engine import XferSet
        from xflowrl.engine.cost import cost_model_from_spec
        from xflowrl.entry_points import zoo_source
        from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
        return GraphEnv(zoo_source(self.graph, self.batch).graph, XferSet.from_name(self.rules),
                        cost_model_from_spec(self.cost_model), EnvConfig(max_steps=NO_STEP_LIMIT))

    @property
    def gap_is_merging(self) -> Optional[bool]:
        """Whether greedy with identical ops merged reaches the best known
        cost (within 1e-6 x the initial cost): the gap is merging alone."""
        if self.greedy_merging_ms is None:
            return None
        return self.greedy_merging_ms <= self.best_ms + 1e-6 * self.initial_ms


def settings_from_rows(rows: Iterable[Mapping[str, Any]],
                       threshold: float = GAP_THRESHOLD) -> List[LookaheadSetting]:
    """The settings of `benchmarks/search_bench.py` rows where the best known
    method beats greedy by at least `threshold` points, largest gap first."""
    out = []
    for row in rows:
        if row.get("gap_pct") is None or row["gap_pct"] < threshold:
            continue
        initial = row["initial_cost_ms"]
        costs = {m: initial * (1 + row[f"{m}_change_pct"] / 100)
                 for m in METHODS if row.get(f"{m}_change_pct") is not None}
        out.append(LookaheadSetting(
            graph=row["graph"], rules=row["rules"], cost_model=row["cost_model"],
            batch=int(row.get("batch", 1)), initial_ms=initial, costs_ms=costs,
            best_methods=tuple(row["winners"]), gap_pct=row["gap_pct"]))
    return sorted(out, key=lambda s: (-s.gap_pct, s.name))


def save_settings(settings: Iterable[LookaheadSetting], path: str,
                  source: Mapping[str, Any]) -> None:
    """Writes the list with where it came from (`source`: commit, command,
    date, machine of the benchmark run)."""
    data = {"format": "xflowrl-lookahead-settings", "version": SETTINGS_VERSION,
            "threshold_pct": GAP_THRESHOLD, "source": dict(source),
            "settings": [dataclasses.asdict(s) for s in settings]}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def load_settings(path: Optional[str] = None) -> List[LookaheadSetting]:
    """The list shipped with the package (or the file at `path`).

    Raises:
      ValueError: the file is not a settings list of `SETTINGS_VERSION`.
    """
    if path is None:
        text = importlib.resources.files("xflowrl.search").joinpath(
            "data", _FILE).read_text()
        where = f"xflowrl/search/data/{_FILE}"
    else:
        with open(path) as f:
            text = f.read()
        where = path
    data = json.loads(text)
    if data.get("format") != "xflowrl-lookahead-settings":
        raise ValueError(f"{where}: not a lookahead settings list")
    if data.get("version") != SETTINGS_VERSION:
        raise ValueError(f"{where}: version {data.get('version')!r}; this xflowrl reads "
                         f"version {SETTINGS_VERSION}")
    return [LookaheadSetting(**{**s, "best_methods": tuple(s["best_methods"])})
            for s in data["settings"]]


def settings_source(path: Optional[str] = None) -> Dict[str, Any]:
    """Where the list came from: the benchmark run's commit, command, date."""
    if path is None:
        text = importlib.resources.files("xflowrl.search").joinpath(
            "data", _FILE).read_text()
    else:
        with open(path) as f:
            text = f.read()
    return dict(json.loads(text).get("source", {}))


def get_setting(name: str) -> LookaheadSetting:
    """A setting of the shipped list by name.

    Raises:
      ValueError: no setting has that name (the message lists them).
    """
    settings = load_settings()
    for s in settings:
        if s.name == name:
            return s
    raise ValueError(f"no lookahead setting {name!r}; the list has "
                     f"{[s.name for s in settings]}")
