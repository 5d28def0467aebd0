"""Checks that an installed xflowrl, not the source checkout, works.

    .venv/bin/python scripts/check_wheel.py [--keep]

1. Copies the working tree (git's tracked and untracked, not ignored, files)
   to a temporary folder, so that the checkout's own build/ and in-place
   engine are left alone.
2. Builds the wheel there: `pip wheel --no-deps --no-build-isolation` with
   this interpreter (its setuptools and Cython; pyproject.toml declares them
   for builds that are isolated).
3. Installs the wheel with `--no-deps` into a fresh venv whose `.pth` file
   adds this interpreter's site-packages (so TensorFlow and the rest of the
   pinned stack are not installed again). A `.pth` line that is a plain path
   does not run the checkout's own `.pth` files, so the editable link to the
   checkout stays out of the fresh venv.
4. From a folder outside the checkout, runs TASO's search on a zoo graph
   with the default rule set and checks that xflowrl, its engine, the
   planner's extension and its rule files were loaded from the fresh venv,
   and that the result equals the checkout's; and that the shipped
   generalist policy is installed and fits the default rule set.

Prints one JSON line and exits non-zero on any failure. It compiles the
engine once: about 2-3 minutes on 2 busy cores, so it is not part of
`pytest tests` but of `.ci/run`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPH, BUDGET = "squeezenet1_1", 50

# Runs in the fresh venv, from a folder outside the checkout; prints JSON.
PROBE = """
import json, sys
import xflowrl
from xflowrl import _engine
from xflowrl import zoo
from xflowrl.planning import _inner
from xflowrl.engine import CostModel, XferSet, xfers
from xflowrl.rules import sets
from xflowrl.search.settings import load_settings
from xflowrl.policy import read_info, shipped_policy
from xflowrl.policy import has_arrays
rule_set = XferSet.default()
result = rule_set.search(zoo.get_graph(sys.argv[1]), CostModel("analytic"),
                         budget=int(sys.argv[2]))
print(json.dumps({"package": xflowrl.__file__, "engine": _engine.__file__,
                  "planner_extension": _inner.__file__,
                  "rule_files": [sets.BUILTIN_RULES, sets.GENERATED_RULES,
                                 sets.TASO_RULES_JSON, sets.PRIMITIVE_RULES],
                  "lookahead_settings": len(load_settings()),
                  "prefix": sys.prefix, "rules": len(rule_set),
                  "initial_cost": result.initial_cost, "best_cost": result.best_cost,
                  "applied": result.applied,
                  "fitted_cost": zoo.get_graph(sys.argv[1]).cost(CostModel("fitted")),
                  "policy": shipped_policy(),
                  "policy_xfers": read_info(shipped_policy()).num_xfers,
                  "policy_arrays": has_arrays(shipped_policy())}))
"""


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}"
                 f"\n{proc.stderr[-3000:]}")
    return proc


def copy_tree(dest: str) -> None:
    """The files git would commit (tracked or untracked, not ignored) that exist."""
    names = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                 cwd=REPO).stdout.split("\0")
    for name in filter(None, names):
        src = os.path.join(REPO, name)
        if os.path.isfile(src):
            os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, name))


def fresh_venv(path: str) -> str:
    """A venv that sees this interpreter's packages; returns its python."""
    _run([sys.executable, "-m", "venv", path])
    python = os.path.join(path, "bin", "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                ).stdout.strip()
    with open(os.path.join(site, "_checkout_deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    return python


def probe(python: str, cwd: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = _run([python, "-c", PROBE, GRAPH, str(BUDGET)], cwd=cwd, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="xflowrl_wheel_")
    start = time.time()
    try:
        src, dist, elsewhere = (os.path.join(work, d) for d in ("src", "dist", "elsewhere"))
        os.makedirs(elsewhere)
        copy_tree(src)
        _run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--no-build-isolation",
              "--disable-pip-version-check", "-q", "-w", dist])
        wheels = [os.path.join(dist, w) for w in os.listdir(dist) if w.endswith(".whl")]
        if len(wheels) != 1:
            sys.exit(f"expected one wheel in {dist}, found {wheels}")
        python = fresh_venv(os.path.join(work, "venv"))
        _run([python, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
              "-q", wheels[0]])
        installed = probe(python, elsewhere)
        prefix = installed["prefix"]
        for key in ("package", "engine", "planner_extension"):
            if not installed[key].startswith(prefix + os.sep):
                sys.exit(f"{key} came from {installed[key]}, not the fresh venv {prefix}")
        for path in installed["rule_files"]:
            if not (path.startswith(prefix + os.sep) and os.path.isfile(path)):
                sys.exit(f"rule file {path} is not installed in the fresh venv {prefix}")
        if not installed["policy"].startswith(prefix + os.sep):
            sys.exit(f"the shipped policy {installed['policy']} is not in the fresh venv")
        if not installed["policy_arrays"]:
            sys.exit("the shipped policy has no policy.npz: xflowrl optimize --method=policy "
                     "would need TensorFlow")
        if installed["policy_xfers"] != installed["rules"]:
            sys.exit(f"the shipped policy has {installed['policy_xfers']} xfers, the default "
                     f"rule set {installed['rules']}: retrain it "
                     f"(experiments/train_generalist.py --ship)")
        checkout = probe(sys.executable, REPO)
        same = {k: installed[k] == checkout[k]
                for k in ("rules", "initial_cost", "best_cost", "applied", "fitted_cost",
                          "lookahead_settings")}
        report = {"wheel": os.path.basename(wheels[0]), "graph": GRAPH, "budget": BUDGET,
                  "rules": installed["rules"], "initial_cost": installed["initial_cost"],
                  "best_cost": installed["best_cost"], "same_as_checkout": same,
                  "seconds": round(time.time() - start, 1)}
        print(json.dumps(report))
        if not all(same.values()):
            sys.exit("the installed copy's search differs from the checkout's")
        if not installed["best_cost"] < installed["initial_cost"]:
            sys.exit("the search found nothing better than the initial graph")
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
