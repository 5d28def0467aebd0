"""Equality saturation's time against TASO's search, measured interleaved;
prints JSON.

    python benchmarks/eqsat_time_bench.py [--graphs=bert,nasrnn] [--rules=taso,default]
        [--batch=1] [--rounds=1] [--out_json=PATH]
    python benchmarks/eqsat_time_bench.py --trees=/tmp/before,. --rounds=1
    python benchmarks/eqsat_time_bench.py --from_json=REPORT.json   # its summary again

The speed target of equality saturation is to be faster than TASO's search
at budget 1,000 (alpha 1.05, its default) in the median over the zoo, with
at most 60 s per graph. On a shared machine the two can only be compared
when they run under the same load, so this benchmark runs them in turn per
setting (graph x rule set, `--cost_model`, `--batch`): TASO's search
(`XferSet.search`, alpha 1.05, budget 1,000, `--taso_time_limit`), then
equality saturation (`equality_saturation`, default `EqsatConfig`, outputs
not checked) of each source tree of `--trees`, for `--rounds` rounds.

Each method runs in a long-lived worker process (one per tree, started
once, its rule sets loaded once, so neither the imports nor the loading of
a rule set are timed; TASO's search runs in the first tree's worker).
Eqsat's seconds are those `search_bench.py` reports (saturation and
extraction: compiling the rules and the output check apart); TASO's the
search's own. Each also gets its process CPU time over the call (the
engine runs on one thread; HiGHS's child process, `xflowrl.search.eqsat.
child`, is counted too), steadier than wall time under load.

The report: every call (setting, round, method, tree, seconds, CPU
seconds, cost, and eqsat's phases), and per method the median, quartiles
and range over the settings of each setting's median over rounds; per
setting and round the ratio eqsat / TASO, their median and range, and
the same for each of eqsat's phases (saturation, extraction) over TASO's
whole search, with extraction's share of eqsat's seconds; how
often eqsat is faster; whether eqsat's cost ever ends above TASO's (1e-6
of the initial cost); per tree after the first, the settings whose
saturated e-graph (`egraph_digest`: every e-node, liveness, class and the
per-iteration trace) or handed-over cost differs from the first tree's
(an ILP program or saturation stopped by a time limit is not
reproducible: such settings are listed apart), those whose ILP programs
ended otherwise (their statuses and CPU seconds in both trees), and per
setting its median CPU, saturation and extraction seconds over the first
tree's (median, quartiles, range; in how many settings its CPU was less);
the load average before and after.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Dict, List

from absl import app, flags

from eqsat_time import summarise, summary_of_report
from tree_workers import define_flags, dispatch, report_out, run_calls

FLAGS = flags.FLAGS
ZOO = ("squeezenet1_1", "resnet18", "vgg19", "resnext50", "resnet50_taso", "bert", "vit",
       "resnet50", "nasrnn", "inception_v3", "nasnet_a")
flags.DEFINE_list("graphs", list(ZOO), "Zoo graphs.")
flags.DEFINE_list("rules", ["tensat", "taso", "default", "generated", "primitive"],
                  "Named rule sets.")
flags.DEFINE_integer("batch", 1, "Batch size the zoo graphs are built at.")
flags.DEFINE_string("cost_model", "analytic/v100", "Cost model, BACKEND/PROFILE.")
flags.DEFINE_float("taso_time_limit", 60.0, "TASO's search: wall-clock limit (s).")
define_flags("equality saturation")


# ---------------------------------------------------------------------------
# The worker: one call per line of stdin, one JSON line back.

class _Worker:
    """Runs calls in this process; rule sets and graphs loaded once."""

    def __init__(self):
        from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
        from xflowrl.entry_points import cost_model_from_spec  # pylint: disable=C0415
        self._xfer_set = XferSet
        self._cost_model_from_spec = cost_model_from_spec
        self._xfers: Dict[str, Any] = {}
        self._models: Dict[str, Any] = {}

    def _setting(self, call: dict):
        from xflowrl import zoo  # pylint: disable=import-outside-toplevel
        rules = call["rules"]
        if rules not in self._xfers:
            self._xfers[rules] = self._xfer_set.from_name(rules)
        if call["cost_model"] not in self._models:
            self._models[call["cost_model"]] = self._cost_model_from_spec(call["cost_model"],
                                                                          None)
        graph = (zoo.get_graph(call["graph"]) if call["batch"] == 1
                 else zoo.get_graph(call["graph"], batch_size=call["batch"]))
        return graph, self._xfers[rules], self._models[call["cost_model"]]

    def run(self, call: dict) -> dict:
        graph, xfers, model = self._setting(call)
        initial = graph.cost(model)
        if call["method"] == "taso":
            cpu = time.process_time()
            r = xfers.search(graph, model, alpha=1.05, budget=1000,
                             time_limit_s=call["taso_time_limit"])
            return {"seconds": r.seconds, "cpu_seconds": time.process_time() - cpu,
                    "cost_ms": r.best_cost, "initial_ms": initial,
                    "expansions": r.expansions}
        from xflowrl.search.eqsat import (  # pylint: disable=import-outside-toplevel
            EqsatConfig,
            equality_saturation,
            saturation,
        )
        captured: Dict[str, Any] = {}
        saturate = saturation.saturate

        def capturing(eg, *args, **kwargs):
            out = saturate(eg, *args, **kwargs)
            if "digest" in captured:  # the second start's: not digested
                return out
            # The digest is taken here, its CPU left out of the call's, so
            # that nothing holds the e-graph past the call: freeing it is
            # part of the call, as it is for a user.
            digest_cpu = time.process_time()
            captured["digest"] = egraph_digest(eg, out[1])
            captured["digest_cpu"] = time.process_time() - digest_cpu
            return out
        saturation.saturate = capturing
        try:
            cpu, child_cpu = time.process_time(), _child_cpu_seconds()
            e = equality_saturation(graph, xfers, model, EqsatConfig(check_outputs=False))
            cpu = time.process_time() - cpu - captured["digest_cpu"]
            cpu += _child_cpu_seconds() - child_cpu   # HiGHS's process
        finally:
            saturation.saturate = saturate
        # A tree before the second start has no `descent_start`.
        started = getattr(e, "descent_start", None)
        second = started.seconds if started is not None else 0.0
        return {"digest": captured["digest"],
                "seconds": e.saturation_seconds + e.extraction_seconds + second,
                "second_start_seconds": second,
                "cpu_seconds": cpu, "cost_ms": e.best_cost,
                "initial_ms": initial, "saturation_seconds": e.saturation_seconds,
                "extraction_seconds": e.extraction_seconds, "stop_reason": e.stop_reason,
                "e_nodes": e.e_nodes, "ilp_status": e.ilp_status,
                "ilp_programs": e.ilp_programs, "handed_over": e.handed_over,
                "greedy_ms": e.greedy_cost, "ilp_ms": e.ilp_cost,
                "ilp_gap_percent": e.ilp_gap_percent}


def _child_cpu_seconds() -> float:
    """CPU seconds of this process's calls in HiGHS's child process so far
    (`xflowrl.search.eqsat.child`; 0 for a tree from before it)."""
    try:
        from xflowrl.search.eqsat import child  # pylint: disable=import-outside-toplevel
    except ImportError:
        return 0.0
    return child.cpu_seconds()


def egraph_digest(eg, trace) -> str:
    """A digest of a saturated e-graph and its per-iteration trace: every
    e-node (type, parameters, children), whether it is alive, its class's
    representative and weight-side flag, and per iteration the matches
    applied, e-nodes and classes. Read as saturation ends (extraction's
    cycle filtering changes none of these)."""
    classes = [eg.find(c) for c in eg.node_class]
    text = repr((eg.nodes, eg.alive, classes, [eg.class_weight_side[c] for c in classes],
                 [(t.matches, t.e_nodes, t.e_classes) for t in trace]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------
# The parent: a worker per tree (`tree_workers`), calls interleaved.

def _schedule(trees: List[str]):
    """Per round and setting: TASO's search, then each tree's equality
    saturation (reversed every other round)."""
    for round_ in range(FLAGS.rounds):
        for graph in FLAGS.graphs:
            for rules in FLAGS.rules:
                base = {"graph": graph, "rules": rules, "batch": FLAGS.batch,
                        "cost_model": FLAGS.cost_model,
                        "taso_time_limit": FLAGS.taso_time_limit}
                jobs = ([("taso", 0)] if FLAGS.taso else []) + \
                    [("eqsat", k) for k in range(len(trees))]
                if round_ % 2:  # alternate who goes first
                    jobs.reverse()
                yield [(k, dict(base, method=method),
                        {"setting": f"{graph}/{rules}", "round": round_, "method": method})
                       for method, k in jobs]


def main(argv):
    del argv
    if dispatch(lambda: _Worker().run, summary_of_report):
        return
    trees = [os.path.abspath(t) for t in FLAGS.trees]
    load_before = os.getloadavg()
    calls = run_calls(__file__, trees, _schedule(trees))
    report_out({"cost_model": FLAGS.cost_model, "batch": FLAGS.batch, "rounds": FLAGS.rounds,
                "trees": trees, "load_before": load_before, "load_after": os.getloadavg(),
                "summary": summarise(calls, trees), "calls": calls})


if __name__ == "__main__":
    app.run(main)
