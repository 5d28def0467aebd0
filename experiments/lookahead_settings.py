"""Writes the list of settings where looking ahead pays (xflowrl.search.settings)
from runs of benchmarks/search_bench.py.

    python benchmarks/search_bench.py --cost_models=analytic/v100 \
        --rules=tensat,taso,default,generated,primitive --budgets=1000 --workers=2 \
        --out_json=results/search_bench/wave4_v100.json --out_md=results/search_bench/wave4_v100.md
    python experiments/lookahead_settings.py --bench_json=results/search_bench/wave4_v100.json

Every row whose best known method beats one-step greedy by at least
--threshold points of the initial cost becomes a setting; the list goes to
--out (the package's shipped list by default) with its source: the
benchmark files, the command that made them (--bench_command), this
checkout's commit and the date. It prints the list as a Markdown table.

Each setting also gets one-step greedy's cost with identical ops merged in
the input and after every step (`greedy_merging_ms`; `--no_greedy_merging`
skips it): where that alone reaches the best known cost, the gap is what an
e-graph gets from storing each e-node once, not a detour.

Several --bench_json files are joined file by file: where a later file has
a row of a setting an earlier file already has (same graph, rules, cost
model and batch), the earlier row is kept and the later one dropped (each
drop is printed), so a run that adds a rule set can be listed after the
runs it extends without replacing their rows. The list is ordered by gap;
`--keep_order_of=LIST` puts the settings of an earlier list first, in its
order, so that extending the shipped list moves none of its settings.

`--export_graphs=DIR` also writes, per setting, the graphs a GPU check times
(`DIR/<setting name with / as __>.json`): the original, greedy's, TASO's
(the benchmark row's best alpha and budget) and equality saturation's
(its default limits), each as `Graph.to_data` with its estimated cost, so
that a machine without the solvers can rebuild and time them
(`xflowrl.engine.graph_from_data`; benchmarks/gpu_settings_bench.py times
them). `--only=NAME,...` exports those settings alone (the list written to
--out is still the whole list).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess
from typing import Any, Dict, List

from absl import app, flags

from xflowrl.search.settings import (
    GAP_THRESHOLD,
    LookaheadSetting,
    load_settings,
    save_settings,
    settings_from_rows,
)

FLAGS = flags.FLAGS
_PACKAGE_LIST = os.path.join(os.path.dirname(__file__), "..", "xflowrl", "search", "data",
                             "lookahead_settings.json")

flags.DEFINE_list("bench_json", ["results/search_bench/wave4_v100.json"],
                  "search_bench.py result files (their rows are joined).")
flags.DEFINE_string("bench_command", "", "The command that wrote --bench_json (recorded).")
flags.DEFINE_float("threshold", GAP_THRESHOLD, "Points of the initial cost by which the best "
                   "known method must beat greedy.")
flags.DEFINE_string("out", _PACKAGE_LIST, "Where the list goes (default: the shipped list).")
flags.DEFINE_string("export_graphs", "", "A folder: write each setting's original, greedy, "
                    "TASO and eqsat graphs there (for a GPU check).")
flags.DEFINE_bool("greedy_merging", True, "Measure greedy with identical ops merged "
                  "after every step per setting (a greedy walk each).")
flags.DEFINE_list("only", [], "--export_graphs: export these settings alone (names as "
                  "the list writes them, e.g. squeezenet1_1/tensat/analytic-v100).")
flags.DEFINE_string("keep_order_of", "", "A list this one extends (e.g. the shipped list): "
                    "its settings come first, in its order, the others after them; "
                    "otherwise the list is ordered by gap.")


def _commit() -> str:
    root = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+local changes" if dirty else "")


def greedy_merging_cost(setting: LookaheadSetting) -> float:
    """One-step greedy's cost (ms) on `setting` with identical ops merged
    in the input and after every step (`merge_identical_ops`), under the
    setting's rules, cost model and batch and greedy's usual caps."""
    from xflowrl.engine.dedupe import (  # pylint: disable=import-outside-toplevel
        merge_identical_ops,
    )
    from xflowrl.search import greedy_walk  # pylint: disable=import-outside-toplevel
    env = setting.environment()
    graph = merge_identical_ops(env.initial_graph)
    while True:
        walk = greedy_walk(env, max_steps=1, start=graph)
        if not walk.applied:
            return graph.cost(env.cost_model)
        graph = merge_identical_ops(walk.graph)


def with_greedy_merging(settings: List[LookaheadSetting]) -> List[LookaheadSetting]:
    """`settings` with `greedy_merging_ms` measured (one walk each)."""
    out = []
    for s in settings:
        out.append(dataclasses.replace(s, greedy_merging_ms=greedy_merging_cost(s)))
        print(f"{s.name}: greedy {s.change_pct('greedy'):+.2f}%, with merging "
              f"{out[-1].greedy_merging_pct:+.2f}%", flush=True)
    return out


def markdown(settings: List[LookaheadSetting]) -> str:
    """The list as a table: each method's change, the winner, the gap and
    greedy with identical ops merged (bold where that reaches the best)."""
    lines = ["| setting | initial ms | greedy | TASO | eqsat | random descent | best | "
             "gap (points) | greedy, ops merged |",
             "|---|---|---|---|---|---|---|---|---|"]

    def cell(s: LookaheadSetting, method: str) -> str:
        return f"{s.change_pct(method):+.2f}%" if method in s.costs_ms else "—"

    def merging(s: LookaheadSetting) -> str:
        if s.greedy_merging_pct is None:
            return "—"
        text = f"{s.greedy_merging_pct:+.2f}%"
        return f"**{text}**" if s.gap_is_merging else text
    for s in settings:
        lines.append(f"| `{s.name}` | {s.initial_ms:.4g} | {cell(s, 'greedy')} | "
                     f"{cell(s, 'taso')} | {cell(s, 'eqsat')} | {cell(s, 'random')} | "
                     f"{', '.join(s.best_methods)} | {s.gap_pct:.2f} | {merging(s)} |")
    return "\n".join(lines)


def select(settings: List[LookaheadSetting], names: List[str]) -> List[LookaheadSetting]:
    """The settings named in `names` (all of them when `names` is empty).

    Raises:
      ValueError: a name is not in the list (the message lists the names).
    """
    if not names:
        return settings
    known = {s.name for s in settings}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"--only: no setting {unknown}; the list has {sorted(known)}")
    return [s for s in settings if s.name in set(names)]


def _key(row: dict) -> tuple:
    return (row["graph"], row["rules"], row["cost_model"], int(row.get("batch", 1)))


def in_order_of(settings: List[LookaheadSetting],
                earlier: List[LookaheadSetting]) -> List[LookaheadSetting]:
    """`settings` with those named in `earlier` first, in `earlier`'s order,
    and the rest after them in their own order: a list that extends an
    earlier one keeps its settings' positions (reports and experiments name
    "the first N settings")."""
    position = {s.name: k for k, s in enumerate(earlier)}
    first = sorted((s for s in settings if s.name in position), key=lambda s: position[s.name])
    return first + [s for s in settings if s.name not in position]


def join_rows(files: List[List[dict]], names: List[str]) -> List[dict]:
    """The rows of several benchmark files, the first file's row of a
    setting kept where later files repeat it (each drop printed)."""
    rows: List[dict] = []
    seen: Dict[tuple, str] = {}
    for name, file_rows in zip(names, files):
        for row in file_rows:
            key = _key(row)
            if key in seen:
                print(f"{name}: {'/'.join(map(str, key))} is already in {seen[key]}; "
                      f"its row there is kept")
                continue
            seen[key] = name
            rows.append(row)
    return rows


def export_graphs(settings: List[LookaheadSetting], rows: List[dict], folder: str) -> None:
    """Writes each setting's graphs (see the module docstring)."""
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import (  # pylint: disable=import-outside-toplevel
        cost_model_from_spec,
        zoo_source,
    )
    from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT  # pylint: disable=C0415
    from xflowrl.search import greedy_walk  # pylint: disable=import-outside-toplevel
    from xflowrl.search.eqsat import (  # pylint: disable=import-outside-toplevel
        EqsatConfig,
        equality_saturation,
    )
    os.makedirs(folder, exist_ok=True)
    by_key = {_key(r): r for r in rows}
    for s in settings:
        row = by_key[(s.graph, s.rules, s.cost_model, s.batch)]
        graph = zoo_source(s.graph, s.batch).graph
        xfers = XferSet.from_name(s.rules)
        cost_model = cost_model_from_spec(s.cost_model, None)
        env = GraphEnv(graph, xfers, cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
        best = row["best_search"]
        graphs = {"original": graph, "greedy": greedy_walk(env).graph,
                  "taso": xfers.search(graph, cost_model, alpha=best["alpha"],
                                       budget=best["budget"], time_limit_s=60).graph,
                  "eqsat": equality_saturation(graph, xfers, cost_model,
                                               EqsatConfig(check_outputs=False)).graph}
        data: Dict[str, Any] = {
            "setting": s.name, "cost_model": s.cost_model, "batch": s.batch,
            "graphs": {k: {"estimated_ms": g.cost(cost_model), "graph": g.to_data()}
                       for k, g in graphs.items()}}
        path = os.path.join(folder, s.name.replace("/", "__") + ".json")
        with open(path, "w") as f:
            json.dump(data, f)
        print(f"{s.name}: " + ", ".join(f"{k} {v['estimated_ms']:.4f} ms"
                                        for k, v in data["graphs"].items()), flush=True)


def main(argv):
    del argv
    files = []
    for path in FLAGS.bench_json:
        with open(path) as f:
            files.append(json.load(f))
    rows = join_rows(files, list(FLAGS.bench_json))
    settings = settings_from_rows(rows, FLAGS.threshold)
    if FLAGS.keep_order_of:
        settings = in_order_of(settings, load_settings(FLAGS.keep_order_of))
    exported = select(settings, FLAGS.only)  # unknown names fail before anything is written
    if FLAGS.greedy_merging:
        settings = with_greedy_merging(settings)
        exported = select(settings, FLAGS.only)
    source = {"benchmark_json": list(FLAGS.bench_json), "command": FLAGS.bench_command,
              "commit": _commit(), "date": datetime.date.today().isoformat(),
              "rows": len(rows)}
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out)), exist_ok=True)
    save_settings(settings, FLAGS.out, source)
    print(markdown(settings))
    print(f"{len(settings)} settings of {len(rows)} rows -> {FLAGS.out}")
    if FLAGS.export_graphs:
        export_graphs(exported, rows, FLAGS.export_graphs)


if __name__ == "__main__":
    app.run(main)
