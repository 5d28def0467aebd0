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
for a baseline that did not run; "eqsat" is absent from files written
before it was a baseline, and reads as null). A file may hold more keys beside them
(experiments/baselines.py writes its runtimes in the same object);
`from_json` reads only the record's. Files of version 1 written before the
record was a `Record` name their version under `OLD_VERSION_KEY`
("baselines_version") and read the same; files written before the version
existed (neither key) are read too: their TASO steps carry no locations
(`NO_LOCATION`), and what they lack is None.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from xflowrl.results.records import Record, RecordError, SCHEMA_KEY
from xflowrl.results.records import VERSION_KEY as VERSION_KEY

# The format `to_json` writes; `from_json` reads it and every earlier one.
RECORD_VERSION = 1
# Where files of version 1 named their version before the record was a
# `Record` (and where experiments/baselines.py's baselines.json, a summary
# of several graphs' records, names the version of those it holds).
OLD_VERSION_KEY = "baselines_version"
# The record's own keys in a file (in the order `to_json` writes them).
_KEYS = ("max_locations", "greedy", "taso", "random", "eqsat")

# A step's location when it has none to replay: a record written before
# locations were kept, or a TASO step past the first `max_locations`
# candidates of its xfer (no environment with that cap can take it).
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
    `enqueued`, `initial_cost_ms`, `trace` and `max_locations` are None in
    files written before `RECORD_VERSION` 1 by `run_baselines`.
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
    cheapest episode's (the first of equal ones). `seconds`, `steps` and
    `applied` are None in files written before `RECORD_VERSION` 1."""
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
      eqsat: equality saturation; None when it did not run (or in files
        written before it was a baseline).
      max_locations: the environment's L, under which greedy's and the
        random agent's locations are numbered (None in files written before
        `RECORD_VERSION` 1).
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
    def _fields_from_json(cls: Type["Baselines"], value: Any, lenient: bool,
                          where: str) -> "Baselines":
        """The record from its keys in `value` (others ignored); `lenient`:
        a file of before version 1."""
        if not isinstance(value, Mapping) or not isinstance(value.get("greedy"), Mapping):
            raise RecordError("not a baselines record: no 'greedy' entry (expected what "
                              "Baselines.to_json writes)")
        if lenient:
            try:
                return _from_unversioned(value)
            except KeyError as e:
                raise RecordError(f"baselines record (written before version 1) lacks "
                                  f"the field {e}") from None
        taso, random, eqsat = value.get("taso"), value.get("random"), value.get("eqsat")
        return cls(greedy=_typed(GreedyResult, value["greedy"], "greedy"),
                   taso=None if taso is None else _typed(TasoResult, taso, "taso"),
                   random=None if random is None else _typed(RandomResult, random, "random"),
                   max_locations=value.get("max_locations"),
                   eqsat=None if eqsat is None else _eqsat(eqsat))

    @classmethod
    def from_json(cls: Type["Baselines"], value: Mapping[str, Any],
                  where: str = "") -> "Baselines":
        """The record `to_json` wrote (other keys of `value` are ignored), or
        one of a file of version 1 from before the record was a `Record`
        (`OLD_VERSION_KEY`), or of before version 1.

        Raises:
          RecordError (a ValueError): `value` holds no record (no "greedy"),
            one of another schema or a newer version, or a baseline with
            missing or unknown fields.
        """
        if not isinstance(value, Mapping) or not isinstance(value.get("greedy"), Mapping):
            return cls._fields_from_json(value, False, where)
        schema = value.get(SCHEMA_KEY, cls.SCHEMA)
        if schema != cls.SCHEMA:
            raise RecordError(f"{where or 'Baselines'}: a {schema!r} record, not "
                              f"{cls.SCHEMA!r}")
        version = record_version(value)
        if not isinstance(version, int) or version > RECORD_VERSION or version < 0:
            raise RecordError(f"baselines record of version {version!r}; this xflowrl reads "
                              f"versions up to {RECORD_VERSION}: update it")
        return cls._fields_from_json({k: value[k] for k in _KEYS if k in value}, version == 0,
                                     where)


def record_version(value: Mapping[str, Any]) -> Any:
    """The version of the baselines record in `value`: under `VERSION_KEY`,
    else `OLD_VERSION_KEY` (version 1 before the record was a `Record`),
    else 0 (before versions)."""
    return value.get(VERSION_KEY, value.get(OLD_VERSION_KEY, 0))


def _result_json(result: Any) -> Optional[Dict[str, Any]]:
    """One baseline as a JSON object: its fields, steps as [name, location]."""
    if result is None:
        return None
    out = dataclasses.asdict(result)
    if out["applied"] is not None:
        out["applied"] = [list(step) for step in out["applied"]]
    return out


def _steps(applied: Optional[Sequence[Any]]) -> Optional[List[Step]]:
    """(name, location) pairs from JSON's lists; a bare name (files before
    version 1 kept TASO's names only) gets `NO_LOCATION`."""
    if applied is None:
        return None
    return [(step, NO_LOCATION) if isinstance(step, str) else (str(step[0]), int(step[1]))
            for step in applied]


def _typed(kind: Any, fields: Mapping[str, Any], name: str) -> Any:
    """A version-1 baseline's dataclass from its JSON object: every field,
    no other key."""
    names = {f.name for f in dataclasses.fields(kind)}
    if set(fields) != names:
        raise RecordError(f"baselines record: {name!r} has fields {sorted(fields)}, "
                          f"expected {sorted(names)}")
    values = dict(fields)
    values["applied"] = _steps(values["applied"])
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


def _from_unversioned(data: Mapping[str, Any]) -> Baselines:
    """A record of the two producers before `RECORD_VERSION` 1:
    `run_baselines` (greedy, TASO without trace, steps or enqueued, random
    without steps) and experiments/baselines.py (greedy and TASO with its
    trace). TASO's steps were names only."""
    g = data["greedy"]
    greedy = GreedyResult(cost_ms=g["cost_ms"], seconds=g["seconds"], steps=g["steps"],
                          applied=_steps(g["applied"]) or [])
    taso = None
    if data.get("taso"):
        t = data["taso"]
        applied = _steps(t["applied"]) or []
        trace = t.get("trace")
        taso = TasoResult(cost_ms=t["cost_ms"], seconds=t["seconds"],
                          steps=t.get("steps", len(applied)), applied=applied,
                          alpha=t["alpha"], budget=t["budget"], expansions=t["expansions"],
                          enqueued=t.get("enqueued"), initial_cost_ms=t.get("initial_cost_ms"),
                          trace=None if trace is None else [TracePoint(**p) for p in trace])
    random = None
    if data.get("random"):
        r = data["random"]
        random = RandomResult(cost_ms=r["cost_ms"], std_ms=r["std_ms"], best_ms=r["best_ms"],
                              episodes=r["episodes"])
    return Baselines(greedy=greedy, taso=taso, random=random)
