"""An entry point's time with TensorFlow's graph optimiser (grappler) on and
off, runs alternating; prints JSON.

    python benchmarks/grappler_bench.py [--rounds=2] [--out_json=PATH] -- SCRIPT [ARGS...]

e.g. the suite's quick run of the model-based agent (tests/world_model/quick_run_test.py):

    python benchmarks/grappler_bench.py -- experiments/train_mb.py --quick \\
        --results_dir={tmp} --taso_budget=100 --random_episodes=5 \\
        --eqsat_time_limit=2 --eval_episodes=4 --measure_rounds=1

Each run is a fresh interpreter that sets grappler (`disable_meta_optimizer`)
before the script's first op, then runs the script as `__main__`, as the
suite's fork server runs an entry point (tests/fork_server.py). The runs
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
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

_CHILD = "--run_child"


def _child(grappler: str, argv: List[str]) -> None:
    """Runs `argv` (SCRIPT ARGS...) as `__main__` with grappler as asked."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if grappler == "off":
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(grappler: str, argv: List[str]) -> Dict[str, float]:
    env = dict(os.environ, TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1")
    folder = tempfile.mkdtemp(prefix="grappler_bench_")
    argv = [a.replace("{tmp}", folder) for a in argv]
    cpu, wall = _children_cpu(), time.time()
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), _CHILD, grappler, *argv],
                       env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"grappler": grappler, "seconds": round(time.time() - wall, 2),
            "cpu_seconds": round(_children_cpu() - cpu, 2)}


def main(args: List[str]) -> None:
    if "--" not in args:
        sys.exit(__doc__)
    options, argv = args[:args.index("--")], args[args.index("--") + 1:]
    rounds, out_json = 2, ""
    for option in options:
        name, _, value = option.partition("=")
        if name == "--rounds":
            rounds = int(value)
        elif name == "--out_json":
            out_json = value
        else:
            sys.exit(f"unknown option {option!r}\n{__doc__}")
    if rounds < 1 or not argv:
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
    report = {"argv": argv, "rounds": rounds, "runs": runs, "summary": summary}
    text = json.dumps(report, indent=1)
    print(text)
    if out_json:
        with open(out_json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == _CHILD:
        _child(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1:])
