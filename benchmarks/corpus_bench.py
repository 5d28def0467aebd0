"""The training distribution's table (docs/zoo.md, "The training distribution").

    python benchmarks/corpus_bench.py [--split=all] [--names=resnet/d8w16,...]
        [--max_steps=200] [--table]

Prints one JSON object per corpus member (`xflowrl.corpus`): name, family,
size class, split (and why held out), op count, build seconds, the estimated
cost under `CostModel("analytic")` (profile cpu) and profile v100, and
one-step greedy under analytic/v100 (default rules, `EnvConfig(max_steps)`):
final cost, change in %, steps, seconds and the xfers it applied, by count.
`--table` then prints the per-family markdown table of docs/zoo.md: sizes,
op counts, split, and the share of members where greedy improves at all.
"""

import collections
import json
import time
from typing import Any, Dict, List

from absl import app, flags

from xflowrl import corpus
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.search import greedy_search

FLAGS = flags.FLAGS
flags.DEFINE_enum("split", "all", list(corpus.SPLITS), "Which members.")
flags.DEFINE_list("names", [], "Only these members (default: every member of --split).")
flags.DEFINE_integer("max_steps", 200, "Greedy's step limit (EnvConfig.max_steps).")
flags.DEFINE_bool("table", False, "Also print the per-family markdown table.")


def member_row(spec: corpus.GraphSpec, xfers: XferSet, cpu: CostModel, v100: CostModel,
               max_steps: int) -> Dict[str, Any]:
    """One member's sizes, costs and greedy result."""
    start = time.perf_counter()
    graph = spec.build()
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    episode = greedy_search(GraphEnv(graph, xfers, v100, EnvConfig(max_steps=max_steps)))
    greedy_s = time.perf_counter() - start
    return {
        "name": spec.name, "family": spec.family, "size_class": spec.size_class,
        "split": spec.split, "held_out_by": spec.held_out_by,
        "ops": graph.num_ops(), "build_s": round(build_s, 5),
        "cost_cpu_ms": round(graph.cost(cpu), 5), "cost_v100_ms": round(graph.cost(v100), 5),
        "greedy": {
            "final_v100_ms": round(episode.final_cost, 5),
            "change_pct": round(100.0 * (episode.final_cost / episode.initial_cost - 1.0), 3),
            "steps": len(episode.applied), "seconds": round(greedy_s, 3),
            "applied": dict(collections.Counter(name for name, _ in episode.applied)),
        },
    }


def family_table(rows: List[Dict[str, Any]]) -> str:
    """The markdown table of docs/zoo.md: one line per (family, split)."""
    groups: Dict[tuple, List[Dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        groups[(row["family"], row["split"], row["held_out_by"])].append(row)
    lines = ["| family | split | members (size tag: ops) | ops | greedy improves | "
             "greedy change (v100) |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for (family, split, by), members in groups.items():
        ops = [m["ops"] for m in members]
        changes = [m["greedy"]["change_pct"] for m in members]
        improved = sum(c < 0 for c in changes)
        tags = ", ".join(f"{m['name'].split('/', 1)[1]}: {m['ops']}" for m in members)
        where = split if by is None else f"{split} (by {by})"
        lines.append(f"| {family} | {where} | {tags} | {min(ops)}-{max(ops)} | "
                     f"{improved}/{len(members)} | {min(changes):.1f}% to {max(changes):.1f}% |")
    return "\n".join(lines)


def main(argv):
    del argv
    specs = corpus.specs(FLAGS.split)
    if FLAGS.names:
        specs = [corpus.CORPUS.spec(name) for name in FLAGS.names]
    xfers = XferSet.default()
    cpu, v100 = CostModel("analytic"), CostModel("analytic", profile="v100")
    rows = []
    for spec in specs:
        rows.append(member_row(spec, xfers, cpu, v100, FLAGS.max_steps))
        print(json.dumps(rows[-1]), flush=True)
    if FLAGS.table:
        print(family_table(rows))


if __name__ == "__main__":
    app.run(main)
