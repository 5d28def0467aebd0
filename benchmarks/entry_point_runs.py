"""Fresh runs of an entry point for a benchmark, TensorFlow's graph optimiser
set before the script's first op: what `grappler_bench.py` and
`repro_bench.py` share (their command line `OPTIONS -- SCRIPT ARGS`, the
child interpreter, the JSON report). Defines no flags.

The child is this file: `python benchmarks/entry_point_runs.py --run_child
GRAPPLER SCRIPT ARGS...` sets grappler (`GRAPPLER`), then runs SCRIPT as
`__main__` with ARGS, as the suite's fork server runs an entry point
(tests/fork_server.py).
"""

import json
import os
import runpy
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

_CHILD = "--run_child"
# "default": as the project leaves it (`xflowrl.tracing` turns the arithmetic
# optimiser off on import); "off": grappler disabled whole; "arithmetic_on":
# the arithmetic optimiser on again after the project's modules are imported.
GRAPPLER = ("default", "off", "arithmetic_on")


def _child(grappler: str, argv: List[str]) -> None:
    """Runs `argv` (SCRIPT ARGS...) as `__main__` with grappler as asked
    (TensorFlow imported first only where a setting is made)."""
    if grappler not in GRAPPLER:
        raise ValueError(f"grappler must be one of {GRAPPLER}, got {grappler!r}")
    if grappler != "default":
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if grappler == "off":
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    elif grappler == "arithmetic_on":
        # The project's setting first (xflowrl.tracing makes it once, on
        # import), then the optimiser on again over it.
        from xflowrl.tracing import (  # pylint: disable=import-outside-toplevel
            use_reproducible_grappler,
        )
        use_reproducible_grappler()
        tf.config.optimizer.set_experimental_options({"arithmetic_optimization": True})
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")


def split_command(args: List[str], defaults: Dict[str, str],
                  usage: str) -> Tuple[Dict[str, str], List[str]]:
    """`OPTIONS -- SCRIPT ARGS` as (the options, `defaults` updated by the
    `--name=value` given, and [SCRIPT, ARGS...]). Exits with `usage` where
    there is no `--`, no script, or an option not in `defaults`."""
    if "--" not in args or args.index("--") == len(args) - 1:
        sys.exit(usage)
    options = dict(defaults)
    for option in args[:args.index("--")]:
        name, _, value = option.partition("=")
        if not name.startswith("--") or name[2:] not in defaults:
            sys.exit(f"unknown option {option!r}\n{usage}")
        options[name[2:]] = value
    return options, args[args.index("--") + 1:]


def run(grappler: str, argv: List[str], folder: str,
        env: Optional[Dict[str, str]] = None) -> None:
    """Runs SCRIPT ARGS (`argv`) once in a fresh interpreter with grappler as
    asked, `{tmp}` in an argument replaced by `folder`, its output dropped.

    Raises:
      subprocess.CalledProcessError: the run failed.
    """
    subprocess.run([sys.executable, os.path.abspath(__file__), _CHILD, grappler,
                    *[a.replace("{tmp}", folder) for a in argv]],
                   env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)


def write_report(report: dict, out_json: str) -> None:
    """Prints the report as JSON, and writes it to `out_json` where given."""
    text = json.dumps(report, indent=1)
    print(text)
    if out_json:
        with open(out_json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == _CHILD:
        _child(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
