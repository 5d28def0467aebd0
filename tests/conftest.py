"""Suite-wide settings, applied before any test touches TensorFlow; the two
tiers; the order the two processes take the tests in.

One inter-op thread. TensorFlow runs the independent ops of one graph
concurrently (inter-op parallelism), and under load the order they finish in
can change which of two equal-precision float sums is rounded first: the
same seed's first PPO update then differs in the last bit of a loss, and
sampled actions may part later (CI saw it in `agent_test`'s resume test,
about one run in three on a loaded machine; with one inter-op thread it
passed every time). The tests that promise "to the bit" (resumed runs of the
agents and the world model) are about what a checkpoint restores, not
TensorFlow's scheduling, so the suite runs ops one graph node at a time.

One intra-op thread, and no graph optimiser (grappler). The suite's
networks are small: an op's kernel split over both cores, beside the other
worker's process on the same two cores, waits more than it computes, and
grappler's rewriting of each newly traced tf.function costs more than it
saves on a few calls. Both took TensorFlow-heavy unit tests
(tests/agents/ppo/learning_test.py, tests/world_model/controller_test.py,
tests/policy/runtime_test.py) from 197-312 s to 127-173 s on this 2-core
machine under load, and change nothing a test asserts: what tests compare
bit for bit they compute twice in this process, and what they compare with
a NumPy reference they compare with a tolerance. The entry points a test
starts (subprocesses, Ray workers, the jobs of a test's Ray cluster) get the
one-thread pools too, through TensorFlow's own environment variables
(TF_NUM_INTEROP_THREADS, TF_NUM_INTRAOP_THREADS, inherited by every child
process), for the same reason: they share the two cores with the workers.
Those forked from the fork server (below) run without grappler as well;
those that start fresh run with it, as a user runs them.

Tiers. A test is `e2e` (end to end) when it runs an entry point
(experiments/, benchmarks/, the `xflowrl` command) or a whole training run
(a subprocess, Ray actors or clusters, the agent's full loop); `E2E` below
lists them by node id prefix. Everything else is the unit tier:

    .venv/bin/python -m pytest tests -m "not e2e"   # the unit tier
    .venv/bin/python -m pytest tests -m e2e         # the end-to-end tier

The README's command runs both, in two worker processes (pyproject.toml's
`addopts`: pytest-xdist, `-n 2 --dist=loadscope`: a class's tests run in one
worker, so its setUpClass runs once); `-n 0` runs in this process (one
file, a debugger, `-s`).

Order. The workers take classes in the order collected here, one at a time
as they run out of work: the end-to-end classes first, longest first (the
order of `E2E`), so that no long class starts last and leaves one worker
idle at the end. A class stays whole (its setUpClass runs once).

Entry points. The tests run the project's entry points (`python
experiments/X.py ...`) through `tests.entry_point.run`, `subprocess.run`'s
stand-in, which forks each from a server process that has already imported
TensorFlow and the other heavy libraries: a fresh interpreter spends 8-9 s
of CPU on those imports before an entry point does anything
(tests/fork_server.py says why the fork is as good as a fresh process;
`XFLOWRL_TEST_FORK_SERVER=0` runs them fresh). The processes an entry
point starts itself (Ray's workers, reproduce.py's jobs) start fresh.

Bytecode. Where the environment sets PYTHONDONTWRITEBYTECODE (this
machine's does), no process writes .pyc files, and every process that
imports the project compiles its sources again: the workers, and the
suite's many fresh interpreters (Ray's workers and actors, the
reproduction's jobs, entry points started fresh) and forked entry points.
The project's folders are compiled once here instead, into their
__pycache__ folders (which git ignores; `compileall` skips what is up to
date), and those processes read them.

Ray. Each process of the suite (each worker) gets its own Ray temporary
folder ($RAY_TMPDIR, inherited by the entry points it starts): a local Ray
instance writes its address there, and `ray.init()` in one worker must not
find and join the instance or cluster another worker started.
"""

import compileall
import os
import shutil
import sys
import tempfile

import pytest
import tensorflow as tf

if sys.dont_write_bytecode:
    _ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for _folder in ("xflowrl", "experiments", "benchmarks"):
        compileall.compile_dir(os.path.join(_ROOT, _folder), quiet=1)

# Children inherit these (in this process the calls below set the same).
os.environ["TF_NUM_INTEROP_THREADS"] = os.environ["TF_NUM_INTRAOP_THREADS"] = "1"
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

_RAY_TMPDIR = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="xflowrl-test-ray-")

# The end-to-end tier, by node id prefix (a folder, a file, a class or one
# test), longest first (as measured with two workers on this 2-core machine).
E2E = (
    # experiments/reproduce.py on a two-node Ray cluster, a worker killed.
    "tests/experiments/reproduce_test.py::ReproduceQuickTest",
    "tests/agents/ppo/rollouts_test.py",                 # training on Ray actors, resumed
    "tests/experiments/train_generalist_test.py",
    "tests/world_model/quick_run_test.py",               # train_mb.py --quick, resumed
    "tests/agents/ppo/agent_test.py::TrainingTest",      # training runs; train_mf.py --quick
    "tests/world_model/agent_test.py::RealEpisodesResumeTest",  # the agent's loop, resumed
    "tests/world_model/agent_test.py::ResumeTest",
    "tests/experiments/",                                # every other entry point
    "tests/optimize/cli_test.py",                        # the xflowrl command
    "tests/benchmarks/",                                 # the benchmarks' quick runs
    "tests/ray_jobs/runner_test.py::RunJobsTest",            # Ray tasks
    "tests/generator/without_z3_test.py",                # generate_rules.py without z3
    "tests/planning/learning_from_search_test.py::RayTest",  # self-play on a Ray actor
    "tests/planning/learning_from_search_test.py::IterationTest",  # a whole (tiny) run
    "tests/entry_point_test.py",                         # scripts, forked and fresh
)


def _rank(nodeid: str):
    """The index of the first `E2E` prefix of `nodeid`, or None (unit tier)."""
    for rank, prefix in enumerate(E2E):
        if nodeid.startswith(prefix):
            return rank
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks the end-to-end tier (before `-m` selects) and puts its classes
    first, in `E2E`'s order; the rest keep their order."""
    del config
    scope_rank = {}
    for item in items:
        rank = _rank(item.nodeid)
        if rank is not None:
            item.add_marker(pytest.mark.e2e)
        scope = item.nodeid.rsplit("::", 1)[0]  # the class (or module), as loadscope groups
        scope_rank[scope] = min(scope_rank.get(scope, len(E2E)),
                                len(E2E) if rank is None else rank)
    items.sort(key=lambda item: scope_rank[item.nodeid.rsplit("::", 1)[0]])


def pytest_unconfigure(config):
    """Removes this process's Ray temporary folder (every Ray instance of
    the suite has shut down by now)."""
    del config
    shutil.rmtree(_RAY_TMPDIR, ignore_errors=True)
