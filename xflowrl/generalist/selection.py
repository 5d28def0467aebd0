"""Which trained generalist ships: a rule fixed before any run, scored on
the corpus' validation split only.

The held-out split and the zoo are test sets: the rule never plays them.
It plays each candidate policy folder's zero-shot episode on every
validation graph (`corpus.specs("validation")`: the training families at
sizes and seeds no training or held-out member has) as `xflowrl optimize
--method=policy` acts (its greedy episode, in NumPy where the folder has
`policy.npz`, for at least 1.5 x one-step greedy's steps, credited with the
cheapest graph it passes through; `evaluate.compare`), beside one-step
greedy on the same graph, and scores it:

- per graph, `points_vs_greedy`: the policy's cost minus greedy's, in
  percentage points of the initial cost (negative: cheaper than greedy);
- first criterion, `within_margin`: the number of validation graphs where
  that is at most `MARGIN_POINTS` (2), more is better: the criterion the
  held-out and zoo tables report, on graphs set aside for choosing;
- second, for ties, `mean_points`: the mean of `points_vs_greedy` over the
  graphs, lower is better (how far off the graphs it misses are, and how
  much it gains where it beats greedy);
- third, the order the candidates are given in (the first wins).

`select(folders, xfers, cost_model)` scores every folder and ranks them
(a `Selection`: each candidate's per-graph and summary scores, and the
winner); `markdown` sets it out. experiments/select_generalist.py writes it
and, with --ship, copies the winner to the package's shipped folder.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence

from xflowrl import corpus
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.generalist import evaluate
from xflowrl.policy import has_arrays, load_numpy_policy, load_policy, read_info
from xflowrl.results.generalist import ZeroShotRow

SPLIT = "validation"
MARGIN_POINTS = 2.0
RULE = ("most validation graphs within 2 points of greedy (policy's cheapest graph against "
        "one-step greedy's, in points of the initial cost); ties: the lowest mean of those "
        "points; then the first candidate given")


@dataclasses.dataclass
class GraphScore:
    """One candidate on one validation graph (costs in ms)."""
    graph: str
    initial_ms: float
    greedy_ms: float
    policy_ms: float
    points_vs_greedy: float


@dataclasses.dataclass
class CandidateScore:
    """One candidate policy folder's scores on the validation graphs.

    Attributes:
      folder: the policy folder; seed, commit, command: its policy.json's.
      graphs: per validation graph, in the split's order.
      within_margin: graphs with `points_vs_greedy` <= `MARGIN_POINTS`.
      mean_points: the mean of `points_vs_greedy`.
      rank: 1 for the winner.
    """
    folder: str
    seed: int
    commit: str
    command: str
    graphs: List[GraphScore]
    within_margin: int
    mean_points: float
    rank: int = 0


@dataclasses.dataclass
class Selection:
    """The rule's decision: the candidates in the order given, each ranked,
    and the winner's folder."""
    rule: str
    split: str
    margin_points: float
    graphs: List[str]
    cost_model: str
    candidates: List[CandidateScore]
    winner: str

    def to_json(self) -> Dict:
        return dataclasses.asdict(self)


def validation_graphs(names: Optional[Sequence[str]] = None) -> Dict[str, Callable[[], Graph]]:
    """name -> builder for the validation split's graphs (all, or `names`).

    Raises:
      ValueError: an empty `names`, or a name that is not a validation
        member (a held-out, zoo or training graph is never used to choose).
    """
    specs = {s.name: s for s in corpus.specs(SPLIT)}
    wanted = list(specs) if names is None else list(names)
    if not wanted:
        raise ValueError("no validation graphs named")
    outside = [n for n in wanted if n not in specs]
    if outside:
        raise ValueError(f"not in the {SPLIT} split: {', '.join(outside)}; the rule chooses "
                         f"on validation graphs only")
    return {n: specs[n].build for n in wanted}


def graph_score(row: ZeroShotRow) -> GraphScore:
    """A zero-shot row's score: the policy against greedy in points."""
    points = 100.0 * (row.policy_ms - row.greedy_ms) / row.initial_ms
    return GraphScore(row.graph, row.initial_ms, row.greedy_ms, row.policy_ms, points)


def candidate_score(folder: str, rows: Sequence[ZeroShotRow], seed: int = 0, commit: str = "",
                    command: str = "") -> CandidateScore:
    """A candidate's per-graph scores and its two criteria over `rows`.

    Raises:
      ValueError: no rows.
    """
    if not rows:
        raise ValueError(f"{folder}: no validation graphs to score on")
    graphs = [graph_score(r) for r in rows]
    within = sum(g.points_vs_greedy <= MARGIN_POINTS + 1e-9 for g in graphs)
    mean = sum(g.points_vs_greedy for g in graphs) / len(graphs)
    return CandidateScore(folder, seed, commit, command, graphs, within, mean)


def rank(candidates: Sequence[CandidateScore]) -> List[CandidateScore]:
    """The candidates best first by the rule (sets each one's `rank`):
    most `within_margin`, then lowest `mean_points`, then given order."""
    order = sorted(range(len(candidates)),
                   key=lambda i: (-candidates[i].within_margin, candidates[i].mean_points, i))
    for place, i in enumerate(order, 1):
        candidates[i].rank = place
    return [candidates[i] for i in order]


def _agent(folder: str, env: GraphEnv):
    """The policy of `folder` as `xflowrl optimize` acts: NumPy where it has
    `policy.npz`, else the TensorFlow network."""
    return load_numpy_policy(folder, env) if has_arrays(folder) else load_policy(folder, env)


def select(folders: Sequence[str], xfers: XferSet, cost_model: CostModel,
           graphs: Optional[Sequence[str]] = None,
           progress: Optional[Callable[[str], None]] = None) -> Selection:
    """Scores every policy folder of `folders` on the validation graphs
    (the names `graphs`, default the whole split: `validation_graphs`) and
    ranks them by the rule (module docstring).

    Raises:
      ValueError: no folders, a folder that is not a policy folder, folders
        of different L (max_locations), or a graph outside the validation
        split.
    """
    if not folders:
        raise ValueError("no candidate policy folders")
    infos = [read_info(f) for f in folders]
    for folder, info in zip(folders, infos):
        if info is None:
            raise ValueError(f"{folder} is not a policy folder (no policy.json)")
    if len({i.max_locations for i in infos if i is not None}) > 1:
        raise ValueError("the candidates have different L (max_locations)")
    builders = validation_graphs(graphs)
    assert infos[0] is not None
    config = EnvConfig(max_locations=infos[0].max_locations)
    probe = GraphEnv(next(iter(builders.values()))(), xfers, cost_model, config)
    labels = [f"c{k}" for k in range(len(folders))]
    rows_of = evaluate.compare({label: _agent(f, probe) for label, f in zip(labels, folders)},
                               builders, xfers, cost_model, config, taso_budget=0,
                               random_episodes=0, progress=progress)
    candidates = [candidate_score(f, rows_of[label], i.seed, i.commit, i.command)
                  for label, f, i in zip(labels, folders, infos) if i is not None]
    ranked = rank(candidates)
    return Selection(RULE, SPLIT, MARGIN_POINTS, list(builders), cost_model.name, candidates,
                     ranked[0].folder)


def markdown(selection: Selection) -> str:
    """The decision as tables: per candidate its summary and rank, then
    each graph's points against greedy per candidate."""
    cands = selection.candidates
    lines = [f"Rule: {selection.rule}.", "",
             "| rank | candidate | seed | within 2 points of greedy | mean points vs greedy |",
             "|---:|---|---:|---:|---:|"]
    for c in sorted(cands, key=lambda c: c.rank):
        lines.append(f"| {c.rank} | {c.folder} | {c.seed} | {c.within_margin} of "
                     f"{len(c.graphs)} | {c.mean_points:+.2f} |")
    lines += ["", f"Ships: {selection.winner}", "",
              "Per graph, the policy's change and greedy's (% of the initial cost):", "",
              "| graph | greedy | " + " | ".join(f"seed {c.seed}" for c in cands) + " |",
              "|---|---:|" + "---:|" * len(cands)]
    for k, name in enumerate(selection.graphs):
        first = cands[0].graphs[k]
        greedy = 100.0 * (first.greedy_ms / first.initial_ms - 1.0)
        cells = [f"{100.0 * (c.graphs[k].policy_ms / c.graphs[k].initial_ms - 1.0):+.2f}%"
                 for c in cands]
        lines.append(f"| {name} | {greedy:+.2f}% | " + " | ".join(cells) + " |")
    return "\n".join(lines)
