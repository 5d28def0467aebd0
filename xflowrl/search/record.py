"""The record of the baselines on one graph: what `run_baselines` returns and
what the entry points write, typed, and read back by the same code.

`Baselines` holds one-step greedy's, TASO's search's, the random agent's
and equality saturation's results (`GreedyResult`, `TasoResult`,
`RandomResult`, `EqsatResult`) under one environment's rules, cost model
and location cap. Each carries its cost and its seconds; the first three
their steps and the substitutions they applied as (xfer name, location)
pairs, the form `xflowrl.env.replay` takes, so every graph is rebuilt by
replaying them (`xflowrl.search.baselines.replay_result`), never by
searching again; equality saturation, whose graph is extracted rather than
stepped to, the graph itself.

On disk a record is JSON (`to_json`, `from_json`): a
`xflowrl.results.records.Record` of the schema "baselines", an object with
"schema" and "schema_version" (`VERSION_KEY`), the location cap
"max_locations" and the keys "greedy", "taso", "random" and "eqsat" (null
for a baseline that did not run). A file may hold more keys beside them
(experiments/baselines.py writes its runtimes in the same object);
`from_json` reads only the record's, all of them, of `RECORD_VERSION` only:
a file without "schema" and "schema_version" (one written before the
record, whose TASO steps had no locations) or of another version is
refused, to be written anew by running its baselines again.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from xflowrl.results.records import Record, RecordError, SCHEMA_KEY
from xflowrl.results.records import VERSION_KEY as VERSION_KEY

# The format `to_json` writes and `from_json` reads.
RECORD_VERSION = 1
# The record's own keys in a file (in the order `to_json` writes them).
_KEYS = ("max_locations", "greedy", "taso", "random", "eqsat")

# A step's location when it has none to replay: a TASO step past the first
# `max_locations` candidates of its xfer (no environment with that cap can
# take it).
NO_LOCATION = -1

Step = Tuple[str, int]


@dataclasses.dataclass(frozen=True)
class TracePoint:
    """One improvement of TASO's search (and its end): the best cost after
    `expansions` graphs and `seconds`."""
    expansions: int
    seconds: float
    best_cost_ms: float


@dataclasses.dataclass(frozen=True)
class GreedyResult:
    """One-step greedy's episode, without a step limit (it stops when no
    candidate improves)."""
    cost_ms: float
    seconds: float
    steps: int
    applied: List[Step]


@dataclasses.dataclass(frozen=True)
class TasoResult:
    """TASO's backtracking search (`XferSet.search`).

    `seconds` is the search's wall time; `steps` and `applied` build its
    best graph, whose cost is `cost_ms`; `max_locations` is the cap its
    locations are numbered under (the environment's, unless a step was past
    it: then a larger one, under which every step has a location).
    """
    cost_ms: float
    seconds: float
    steps: int
    applied: List[Step]
    alpha: float
    budget: int
    expansions: int
    enqueued: Optional[int] = None
    initial_cost_ms: Optional[float] = None
    trace: Optional[List[TracePoint]] = None
    max_locations: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class RandomResult:
    """The random agent over `episodes` episodes: `cost_ms` is the mean of
    their final costs (`std_ms` its standard deviation), `best_ms` the
    cheapest; `seconds` is all episodes' time; `steps` and `applied` are the
    cheapest episode's (the first of equal ones)."""
    cost_ms: float
    std_ms: float
    best_ms: float
    episodes: int
    seconds: Optional[float] = None
    steps: Optional[int] = None
    applied: Optional[List[Step]] = None


@dataclasses.dataclass(frozen=True)
class EqsatResult:
    """Equality saturation (`xflowrl.search.eqsat`): its graph is extracted
    from an e-graph, not stepped to, so the record holds the graph itself
    (`graph`, `Graph.to_data`; `xflowrl.engine.graph_from_data` builds it).

    `cost_ms` is that graph's cost (never above the initial cost);
    `handed_over` says whose graph it is ("ilp", "greedy" extraction, the
    one-step greedy "descent" the ILP started from, or the "original"); `greedy_extraction_ms` and `ilp_ms` are the two
    extractions' (`ilp_ms` None where the ILP found none); `stop_reason`,
    `iterations` and `e_nodes` describe the saturation, under
    `time_limit_s`; `seconds` is the whole run."""
    cost_ms: float
    seconds: float
    handed_over: str
    greedy_extraction_ms: float
    ilp_ms: Optional[float]
    ilp_status: str
    stop_reason: str
    iterations: int
    e_nodes: int
    time_limit_s: float
    graph: Dict[str, Any]


@dataclasses.dataclass
class Baselines(Record):
    """The baselines on one graph under one environment (`run_baselines`).

    Attributes:
      greedy: one-step greedy (always run).
      taso: TASO's search; None when it did not run (budget 0).
      random: the random agent; None when it did not run (no episodes).
      eqsat: equality saturation; None when it did not run.
      max_locations: the environment's L, under which greedy's and the
        random agent's locations are numbered.
    """

    SCHEMA = "baselines"
    VERSION = RECORD_VERSION

    greedy: GreedyResult
    taso: Optional[TasoResult] = None
    random: Optional[RandomResult] = None
    max_locations: Optional[int] = None
    eqsat: Optional[EqsatResult] = None

    def rows(self) -> List[Tuple[str, float]]:
        """(row name, cost) for a results table."""
        rows = [("one-step greedy", self.greedy.cost_ms)]
        if self.taso:
            rows.append((f"TASO search (alpha {self.taso.alpha}, budget {self.taso.budget})",
                         self.taso.cost_ms))
        if self.random:
            rows.append((f"random agent (mean of {self.random.episodes})", self.random.cost_ms))
        if self.eqsat:
            rows.append((f"equality saturation ({self.eqsat.stop_reason}, "
                         f"{self.eqsat.e_nodes} e-nodes)", self.eqsat.cost_ms))
        return rows

    def _fields_to_json(self) -> Dict[str, Any]:
        return {"max_locations": self.max_locations, "greedy": _result_json(self.greedy),
                "taso": _result_json(self.taso), "random": _result_json(self.random),
                "eqsat": None if self.eqsat is None else dataclasses.asdict(self.eqsat)}

    @classmethod
    def _fields_from_json(cls: Type["Baselines"], value: Any, where: str) -> "Baselines":
        """The record from its keys in `value` (others ignored), every one
        of them present."""
        if not isinstance(value, Mapping) or not isinstance(value.get("greedy"), Mapping):
            raise RecordError(f"{where or 'Baselines'}: not a baselines record: no 'greedy' "
                              "entry (expected what Baselines.to_json writes)")
        missing = [k for k in _KEYS if k not in value]
        if missing:
            raise RecordError(f"{where or 'Baselines'}: a baselines record without {missing}")
        taso, random, eqsat = value["taso"], value["random"], value["eqsat"]
        return cls(greedy=_typed(GreedyResult, value["greedy"], "greedy"),
                   taso=None if taso is None else _typed(TasoResult, taso, "taso"),
                   random=None if random is None else _typed(RandomResult, random, "random"),
                   max_locations=value["max_locations"],
                   eqsat=None if eqsat is None else _eqsat(eqsat))

    @classmethod
    def from_json(cls: Type["Baselines"], value: Mapping[str, Any],
                  where: str = "") -> "Baselines":
        """The record `to_json` wrote (other keys of `value` are ignored).

        Args:
          value: the JSON object holding the record.
          where: what to name it in errors (the file's path).

        Raises:
          RecordError (a ValueError): `value` holds no record (no "greedy"),
            one of another schema, one without a schema or version (written
            before the record) or of another version, or a baseline with
            missing or unknown fields.
        """
        where = where or "Baselines"
        if not isinstance(value, Mapping) or not isinstance(value.get("greedy"), Mapping):
            return cls._fields_from_json(value, where)
        schema, version = value.get(SCHEMA_KEY), value.get(VERSION_KEY)
        if schema is not None and schema != cls.SCHEMA:
            raise RecordError(f"{where}: a {schema!r} record, not {cls.SCHEMA!r}")
        if schema is None or version is None:
            raise RecordError(f"{where}: a baselines record without {SCHEMA_KEY!r} or "
                              f"{VERSION_KEY!r} (version 0, written before the record); this "
                              f"code reads version {RECORD_VERSION} only: run the baselines "
                              "again")
        if version != RECORD_VERSION:
            raise RecordError(f"{where}: baselines record version {version!r}; this code reads "
                              f"version {RECORD_VERSION} only: run the baselines again")
        return cls._fields_from_json({k: value[k] for k in _KEYS if k in value}, where)


def _result_json(result: Any) -> Optional[Dict[str, Any]]:
    """One baseline as a JSON object: its fields, steps as [name, location]."""
    if result is None:
        return None
    out = dataclasses.asdict(result)
    if out["applied"] is not None:
        out["applied"] = [list(step) for step in out["applied"]]
    return out


def _steps(applied: Optional[Sequence[Any]], name: str) -> Optional[List[Step]]:
    """(name, location) pairs from JSON's lists of two."""
    if applied is None:
        return None
    if not all(isinstance(step, list) and len(step) == 2 for step in applied):
        raise RecordError(f"baselines record: {name!r} has steps that are not "
                          "[xfer, location] pairs")
    return [(str(step[0]), int(step[1])) for step in applied]


def _typed(kind: Any, fields: Mapping[str, Any], name: str) -> Any:
    """A baseline's dataclass from its JSON object: every field, no other
    key."""
    names = {f.name for f in dataclasses.fields(kind)}
    if set(fields) != names:
        raise RecordError(f"baselines record: {name!r} has fields {sorted(fields)}, "
                          f"expected {sorted(names)}")
    values = dict(fields)
    values["applied"] = _steps(values["applied"], name)
    if values.get("trace") is not None:
        values["trace"] = [TracePoint(**p) for p in values["trace"]]
    return kind(**values)


def _eqsat(fields: Mapping[str, Any]) -> EqsatResult:
    names = {f.name for f in dataclasses.fields(EqsatResult)}
    if not isinstance(fields, Mapping) or set(fields) != names:
        raise RecordError(f"baselines record: 'eqsat' has fields "
                          f"{sorted(fields) if isinstance(fields, Mapping) else fields!r}, "
                          f"expected {sorted(names)}")
    return EqsatResult(**fields)
