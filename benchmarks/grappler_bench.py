"""An entry point's time with TensorFlow's graph optimiser (grappler) on and
off, runs alternating; prints JSON.

    python benchmarks/grappler_bench.py [--rounds=2] [--out_json=PATH] -- SCRIPT [ARGS...]

e.g. the suite's quick run of the model-based agent (tests/world_model/quick_run_test.py):

    python benchmarks/grappler_bench.py -- experiments/train_mb.py --quick \\
        --results_dir={tmp} --taso_budget=100 --random_episodes=5 \\
        --eqsat_time_limit=2 --eval_episodes=4 --measure_rounds=1

Each run is a fresh interpreter that sets grappler before the script's
first op, then runs the script as `__main__` (`entry_point_runs.py`, as
the suite's fork server runs an entry point): on, as the project leaves it
(its arithmetic optimiser off, `xflowrl.tracing`), or off altogether
(`disable_meta_optimizer`). The runs
get the suite's one-thread pools (TF_NUM_INTEROP_THREADS,
TF_NUM_INTRAOP_THREADS = 1). `{tmp}` in an argument becomes a new empty
folder for each run (an entry point would otherwise reuse the first run's
results). Per round, grappler on, then off. The report:
every run's wall seconds and CPU seconds (user and system, of the run's
process tree as far as it is waited for), and per setting the median and
range.
"""

import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, List

import entry_point_runs

# This benchmark's settings, as entry_point_runs names them.
_GRAPPLER = {"on": "default", "off": "off"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(grappler: str, argv: List[str]) -> Dict[str, float]:
    env = dict(os.environ, TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1")
    folder = tempfile.mkdtemp(prefix="grappler_bench_")
    cpu, wall = _children_cpu(), time.time()
    try:
        entry_point_runs.run(_GRAPPLER[grappler], argv, folder, env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"grappler": grappler, "seconds": round(time.time() - wall, 2),
            "cpu_seconds": round(_children_cpu() - cpu, 2)}


def main(args: List[str]) -> None:
    options, argv = entry_point_runs.split_command(args, {"rounds": "2", "out_json": ""},
                                                   __doc__)
    rounds = int(options["rounds"])
    if rounds < 1:
        sys.exit(__doc__)
    runs = []
    for r in range(rounds):
        for grappler in ("on", "off"):
            runs.append(dict(_run(grappler, argv), round=r))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    summary = {}
    for grappler in ("on", "off"):
        for key in ("seconds", "cpu_seconds"):
            values = sorted(run[key] for run in runs if run["grappler"] == grappler)
            summary[f"{grappler}_{key}"] = {"median": round(statistics.median(values), 2),
                                            "range": [values[0], values[-1]]}
    entry_point_runs.write_report({"argv": argv, "rounds": rounds, "runs": runs,
                                   "summary": summary}, options["out_json"])


if __name__ == "__main__":
    main(sys.argv[1:])
