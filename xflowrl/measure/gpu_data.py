"""The learned GPU cost model's data: graphs timed end to end on a GPU.

What is timed (`items`, in this order, so that a run cut short by its time
limit keeps the most useful part):

1. **zoo graphs** (`CollectConfig.zoo`) at every batch of `batches` (the
   convolutional graphs' batch size; for the transformers BERT and ViT the
   sequence length, 64 x batch);
2. **greedy's graphs**: one-step greedy under `GREEDY_COST` (analytic/v100,
   the issue's baseline) from each zoo graph at batch 1, its final graph at
   every batch (the same substitutions replayed on the graph of that batch);
3. **random walks**: `random_walks` walks of `walk_steps` uniformly drawn
   substitutions per zoo graph, their last graph at every batch;
4. **micro-benchmarks**: `xflowrl.measure.micro_models`' single-op chains
   and fan-outs over shapes (one op configuration per model), as built;
5. **corpus graphs** (`CollectConfig.corpus`: the first members of the
   training corpus's families, as built) and their greedy graphs;
6. **graphs along the walks**: `walk_points` evenly spaced graphs of each
   greedy and random walk, at every batch.

Each graph is timed in every precision of `dtypes` in PyTorch
(`xflowrl.measure.torch_runtime.TorchProgram`): a CUDA-graph replay (the
kernels without the host's launches), `rounds` rounds of `repeats` runs,
the median of the round medians; eager too where `eager` is set. Where
`compile_seconds` > 0, after everything else, `torch.compile` times the
zoo graphs of at most `COMPILE_MAX_OPS` ops at the smallest batch, smallest
first, until that much time is spent (compilation counted; `max_seconds`
includes it; a compilation once started runs to its end). On the CPU
(`device="cpu"`, the dry run) the same path runs in PyTorch on the CPU
(wall clock, eager) or, without PyTorch, in the numpy reference executor.

The data of a card lives in ``<data_dir>/<card>.jsonl`` (one record per
graph, precision and timing mode) and the graphs it names in
``<data_dir>/graphs/<sha>.json.gz`` (`Graph.to_data`, content addressed),
so that more runs append and a refit reads every run (`read_records`).
A record (`Record`) holds the card, the precision, the batch, what the graph
is (`source`, `name`, `variant`), its sha, the timing and the versions
and command of the run that made it.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
import os
import platform
import statistics
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from xflowrl.engine import cost as engine_cost
from xflowrl.engine.graph import Graph, graph_from_data

Progress = Optional[Callable[[str], None]]

DATA_DIR = os.path.join(engine_cost.PROFILES_DIR, "gpu_times")
GRAPHS_DIR = "graphs"
# The zoo graphs the data set times (the six).
ZOO = ("squeezenet1_1", "resnet18", "resnet50", "inception_v3", "bert", "vit")
TRANSFORMERS = ("bert", "vit")
BASE_SEQUENCE = 64
GREEDY_COST = "analytic/v100"
# torch.compile only graphs this small (a compilation cannot be cut short;
# SqueezeNet, ResNet-18, BERT and ViT at batch 1 are, ResNet-50 is not).
COMPILE_MAX_OPS = 130
SCHEMA = "xflowrl.gpu_times"
SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class CollectConfig:
    """What `collect` times and how.

    Attributes:
      batches: batch sizes (the transformers: sequence length 64 x batch).
      dtypes: precisions (`xflowrl.measure.torch_runtime.DTYPES`).
      budget: "quick" or "full": `full` adds corpus graphs and longer walks.
      seed: walks, weights and inputs.
      device: "cuda", or "cpu" for the dry run.
      zoo: the zoo graphs.
      tiny: the dry run's sizes: small graphs (`xflowrl.zoo.REDUCED` sizes,
        `small_cnn` for the convolutional ones), two walk graphs, a few
        micro-models.
      walk_points: graphs kept along a walk besides its last (evenly spaced).
      random_walks: random walks per zoo graph.
      walk_steps: substitutions per random walk.
      corpus: corpus graphs (first per family); 0: none.
      micro: micro-model configurations per op family; 0: none.
      rounds: timing rounds per graph and precision.
      repeats: timed runs per round.
      warmup: untimed runs before each round.
      eager: also time eagerly (one Python call per op).
      compile_seconds: time budget of `torch.compile` timings (0: none).
      max_seconds: start nothing new after this many seconds.
    """
    batches: Tuple[int, ...] = (1, 8, 32)
    dtypes: Tuple[str, ...] = ("float32", "bfloat16")
    budget: str = "quick"
    seed: int = 0
    device: str = "cuda"
    zoo: Tuple[str, ...] = ZOO
    tiny: bool = False
    walk_points: int = 3
    random_walks: int = 1
    walk_steps: int = 24
    corpus: int = 0
    micro: int = 4
    rounds: int = 3
    repeats: int = 20
    warmup: int = 3
    eager: bool = False
    compile_seconds: float = 0.0
    max_seconds: float = 420.0

    @staticmethod
    def for_budget(budget: str, **overrides) -> "CollectConfig":
        """The defaults of a budget ("quick", "full"), then `overrides`."""
        if budget not in ("quick", "full"):
            raise ValueError(f"unknown budget {budget!r}; choose from ('quick', 'full')")
        base: Dict[str, Any] = dict(budget=budget)
        if budget == "full":
            base.update(random_walks=2, walk_steps=40, corpus=12, micro=8, walk_points=6)
        base.update(overrides)
        return CollectConfig(**base)


@dataclasses.dataclass
class Item:
    """One graph to time: what it is and the graph itself."""
    source: str        # "zoo", "greedy", "random", "corpus", "micro"
    name: str          # zoo or corpus name, or the micro-model's name
    variant: str       # "original", "greedy@<steps>", "random<k>@<steps>", ...
    batch: int
    graph: Graph
    weights: Optional[Dict[str, np.ndarray]] = None
    feeds: Optional[Dict[str, np.ndarray]] = None
    gain: float = 2.0 ** 0.5
    # The graph whose weights' roles draw the values (a walk's original: a
    # rewritten graph reads the same weights through fused ops).
    origin: Optional[Graph] = None


# ------------------------------------------------------------------ graphs


def zoo_graph(name: str, batch: int, tiny: bool = False) -> Graph:
    """Zoo graph `name` at `batch` (transformers: sequence length 64 x batch;
    `tiny`: the small sizes of the dry run)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    if tiny:
        if name in TRANSFORMERS:
            args = dict(zoo.REDUCED[name])
            key = "seq_len" if name == "bert" else "patches"
            args[key] = int(args[key]) * batch
            return zoo.get_graph(name, **args)
        return zoo.get_graph("small_cnn", batch_size=batch, image_size=16, width=8)
    if name in TRANSFORMERS:
        key = "seq_len" if name == "bert" else "patches"
        return zoo.get_graph(name, **{key: BASE_SEQUENCE * batch})
    return zoo.get_graph(name, batch_size=batch)


@functools.lru_cache(maxsize=1)
def _default_xfers():
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    return XferSet.default()


@functools.lru_cache(maxsize=4)
def _cost_model(spec: str):
    return engine_cost.cost_model_from_spec(spec)


def _env(graph: Graph, cost_spec: str = GREEDY_COST):
    from xflowrl.env import EnvConfig, GraphEnv  # pylint: disable=import-outside-toplevel
    xfers = _default_xfers()
    return GraphEnv(graph, xfers, _cost_model(cost_spec), EnvConfig()), xfers


def greedy_steps(graph: Graph, max_steps: int = 100000) -> List[Tuple[str, int]]:
    """The substitutions one-step greedy takes under `GREEDY_COST`."""
    from xflowrl.search.greedy import greedy_walk  # pylint: disable=import-outside-toplevel
    env, _ = _env(graph)
    return list(greedy_walk(env, max_steps=max_steps).applied)


def random_steps(graph: Graph, steps: int, rng: np.random.Generator,
                 max_locations: int = 200) -> List[Tuple[str, int]]:
    """`steps` substitutions drawn uniformly among the valid (xfer, location)
    pairs of each graph in turn (fewer where none is left)."""
    env, xfers = _env(graph)
    names = xfers.names
    applied: List[Tuple[str, int]] = []
    for _ in range(steps):
        locs = xfers.locations(graph, max_locations, env.max_ops)
        mask = np.asarray(locs.location_mask())
        pairs = np.argwhere(mask)
        if len(pairs) == 0:
            break
        xfer, location = (int(v) for v in pairs[rng.integers(len(pairs))])
        graph = locs.apply(xfer, location)
        applied.append((names[xfer], location))
    return applied


def replay_prefixes(graph: Graph, applied: Sequence[Tuple[str, int]],
                    keep: Sequence[int]) -> Dict[int, Graph]:
    """The graphs after the first k substitutions of `applied`, for k in `keep`."""
    env, xfers = _env(graph)
    out: Dict[int, Graph] = {}
    wanted = set(keep)
    if 0 in wanted:
        out[0] = graph
    for k in range(1, len(applied) + 1):
        graph = xfers.replay(graph, applied[k - 1:k], max_ops=env.max_ops)
        if k in wanted:
            out[k] = graph
    return out


def _walk_points(n: int, count: int) -> List[int]:
    """Up to `count` evenly spaced step counts in (0, n), without n."""
    if n < 2 or count < 1:
        return []
    return sorted({int(round(n * (k + 1) / (count + 1))) for k in range(count)} - {0, n})


def items(config: CollectConfig, progress: Progress = None) -> Iterator[Item]:
    """The graphs of the data set, in priority order (module docstring)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(config.seed)
    gains = {name: zoo.weight_gain(name) for name in config.zoo}

    def at_batches(name: str, kind: str, label: str, steps, points):
        for batch in config.batches:
            graph = zoo_graph(name, batch, config.tiny)
            for k, g in replay_prefixes(graph, steps, points).items():
                yield Item(kind, name, f"{label}@{k}", batch, g, gain=gains[name],
                           origin=graph)

    for name in config.zoo:
        for batch in config.batches:
            yield Item("zoo", name, "original", batch, zoo_graph(name, batch, config.tiny),
                       gain=gains[name])
    walks: List[Tuple[str, str, str, List[Tuple[str, int]]]] = []
    for name in config.zoo:
        steps = greedy_steps(zoo_graph(name, 1, config.tiny))
        _say(progress, f"{name}: greedy under {GREEDY_COST}, {len(steps)} substitutions")
        walks.append((name, "greedy", "greedy", steps))
        if steps:
            yield from at_batches(name, "greedy", "greedy", steps, [len(steps)])
    for name in config.zoo:
        base = zoo_graph(name, 1, config.tiny)
        for w in range(config.random_walks):
            steps = random_steps(base, config.walk_steps, rng)
            walks.append((name, "random", f"random{w}", steps))
            if steps:
                yield from at_batches(name, "random", f"random{w}", steps, [len(steps)])
    if config.micro:
        # pylint: disable=import-outside-toplevel
        from xflowrl.measure.micro_models import Budget, micro_models
        budget = Budget(copies=4, configs=config.micro, min_ms=1.0, passes=1, zoo_graphs=())
        models = micro_models(budget, config.seed)
        if config.tiny:
            models = models[::max(1, len(models) // 6)][:6]
        for m in models:
            yield Item("micro", m.name, "original", 1, m.graph, weights=m.weights, feeds=m.feeds)
    if config.corpus:
        from xflowrl import corpus  # pylint: disable=import-outside-toplevel
        per_family: Dict[str, int] = {}
        chosen = []
        for spec in corpus.specs("train"):
            if per_family.get(spec.family, 0) >= max(1, config.corpus // 8):
                continue
            per_family[spec.family] = per_family.get(spec.family, 0) + 1
            chosen.append(spec)
            if len(chosen) >= config.corpus:
                break
        for spec in chosen:
            graph = spec.build()
            yield Item("corpus", spec.name, "original", 1, graph, gain=spec.weight_gain)
            steps = greedy_steps(graph)
            if steps:
                final = replay_prefixes(graph, steps, [len(steps)])[len(steps)]
                yield Item("corpus", spec.name, f"greedy@{len(steps)}", 1, final,
                           gain=spec.weight_gain, origin=graph)
    for name, kind, label, steps in walks:
        points = _walk_points(len(steps), config.walk_points)
        if points:
            yield from at_batches(name, kind, label, steps, points)


# ------------------------------------------------------------------ timing


def versions(device: str = "cuda") -> Dict[str, Any]:
    """Card, driver, CUDA, cuDNN and PyTorch versions (what is there)."""
    out: Dict[str, Any] = {"python": platform.python_version(), "machine": platform.node(),
                           "numpy": np.__version__}
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        out["torch"] = None
        return out
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    if device == "cuda" and torch.cuda.is_available():
        out["card"] = torch.cuda.get_device_name(0)
        out["tf32"] = True  # float32 convolutions and matmuls may use TF32
        out["runtime"] = "TorchProgram"
        out["cudnn"] = torch.backends.cudnn.version()
        props = torch.cuda.get_device_properties(0)
        out["memory_gb"] = round(props.total_memory / 2 ** 30, 1)
        out["driver"] = _driver()
    else:
        out["card"] = "cpu"
    return out


def _driver() -> Optional[str]:
    import subprocess  # pylint: disable=import-outside-toplevel
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                 "--format=csv,noheader"], capture_output=True, text=True,
                                timeout=20, check=False)
        return result.stdout.strip().splitlines()[0] if result.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _torch_available() -> bool:
    try:
        import torch  # pylint: disable=import-outside-toplevel,unused-import  # noqa: F401
    except ImportError:
        return False
    return True


def _program_takes_device() -> bool:
    # pylint: disable=import-outside-toplevel
    import inspect

    from xflowrl.measure.torch_runtime import TorchProgram
    params = inspect.signature(TorchProgram.__init__).parameters
    return "dtype" in params and "device" in params


def feeds_of(item: Item, seed: int,
             weights_cache: Optional[Dict[str, Dict[str, np.ndarray]]] = None
             ) -> Dict[str, np.ndarray]:
    """Weights and inputs of an item's graph (the program casts them): the
    micro-model's own, else `random_weights` (float32) with the item's gain
    and `random_inputs` of its origin (a walk's original graph, whose weights
    the rewritten one reads). Weights do not depend on the batch: with
    `weights_cache` they are drawn once per graph name."""
    if item.weights is not None and item.feeds is not None:
        return {**item.weights, **item.feeds}
    # pylint: disable=import-outside-toplevel
    from xflowrl.executor.weights import random_inputs, random_weights
    origin = item.origin if item.origin is not None else item.graph
    weights = None if weights_cache is None else weights_cache.get(item.name)
    if weights is None:
        weights = random_weights(origin, seed, np.float32, gain=item.gain)
        if weights_cache is not None:
            weights_cache[item.name] = weights
    return {**weights, **random_inputs(origin, seed, np.float32)}


def _rounds(step: Callable[[], Any], sync: Callable[[], None], clock: Callable[[], Any],
            config: CollectConfig) -> Dict[str, float]:
    medians = []
    for _ in range(config.rounds):
        for _ in range(config.warmup):
            step()
        sync()
        samples = [clock() for _ in range(config.repeats)]
        medians.append(statistics.median(samples))
    med = statistics.median(medians)
    return {"median_ms": med, "min_ms": min(medians), "max_ms": max(medians),
            "spread_pct": 100.0 * (max(medians) - min(medians)) / med if med > 0 else 0.0,
            "rounds": config.rounds, "repeats": config.repeats}


def time_item(item: Item, dtype: str, config: CollectConfig,
              feeds: Mapping[str, np.ndarray]) -> Dict[str, Dict[str, float]]:
    """Per timing mode ("graph", "eager"), the item's times in `dtype`.

    CUDA: `TorchProgram` in `dtype`, CUDA-graph replay (and eager). CPU with
    PyTorch: the program on the CPU, wall clock, eager (reported as mode
    "cpu"). CPU without PyTorch: the numpy reference executor, wall clock
    (mode "reference", float64 whatever `dtype`).
    """
    if config.device == "cpu" and not (_torch_available() and _program_takes_device()):
        from xflowrl.executor import reference  # pylint: disable=import-outside-toplevel
        def run_reference():
            reference.execute(item.graph, feeds)
        def wall():
            t0 = time.perf_counter()
            run_reference()
            return 1e3 * (time.perf_counter() - t0)
        return {"reference": _rounds(run_reference, lambda: None, wall, config)}
    import torch  # pylint: disable=import-outside-toplevel
    program = make_program(item.graph, feeds, dtype, config.device)
    out: Dict[str, Dict[str, float]] = {}
    if config.device == "cpu":
        def wall_cpu():
            t0 = time.perf_counter()
            program.run()
            return 1e3 * (time.perf_counter() - t0)
        out["cpu"] = _rounds(program.run, lambda: None, wall_cpu, config)
        return out
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    modes = ["graph"] + (["eager"] if config.eager else [])
    for mode in modes:
        step = program._replay() if mode == "graph" else program.run  # pylint: disable=protected-access
        out[mode] = _rounds(step, torch.cuda.synchronize, _event_clock(torch, step), config)
        # Convolutions with a ReLU that ran as two kernels (no fused cuDNN
        # kernel for this precision or shape): the model prices them as one.
        out[mode]["unfused_conv_relu"] = int(getattr(program, "unfused_conv_relu", 0))
    return out


def make_program(graph: Graph, feeds: Mapping[str, np.ndarray], dtype: str, device: str):
    """A `TorchProgram` of `graph` in `dtype` on `device`.

    Raises:
      NotImplementedError: this `TorchProgram` runs only float32 on CUDA and
        another precision or device was asked for.
    """
    # pylint: disable=import-outside-toplevel
    import inspect

    from xflowrl.measure.torch_runtime import TorchProgram
    params = inspect.signature(TorchProgram.__init__).parameters
    if "dtype" in params and "device" in params:
        return TorchProgram(graph, feeds, dtype=dtype, device=device)
    if dtype != "float32" or device != "cuda":
        raise NotImplementedError("this TorchProgram runs float32 on CUDA only")
    return TorchProgram(graph, feeds)


def _event_clock(torch, step: Callable[[], Any]) -> Callable[[], float]:
    def clock() -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))
    return clock


def time_compiled(item: Item, dtype: str, config: CollectConfig,
                  feeds: Mapping[str, np.ndarray]) -> Dict[str, float]:
    """The item under `torch.compile(mode="reduce-overhead")` (Inductor's
    kernels replayed from CUDA graphs; CUDA only), timed with CUDA events
    per call after compiling; the compilation's wall time as `compile_s`."""
    import torch  # pylint: disable=import-outside-toplevel
    program = make_program(item.graph, feeds, dtype, config.device)
    compiled = torch.compile(program.run, mode="reduce-overhead")
    t0 = time.time()
    with torch.no_grad():
        for _ in range(3):  # compile, record the CUDA graphs, replay
            compiled()
        torch.cuda.synchronize()
        compile_s = time.time() - t0
        result = _rounds(compiled, torch.cuda.synchronize, _event_clock(torch, compiled),
                         config)
    result["compile_s"] = compile_s
    return result


# --------------------------------------------------------------- the data


def graph_sha(graph: Graph) -> str:
    """The content address of a graph: sha256 of its canonical `to_data` JSON
    (first 16 hex digits)."""
    text = json.dumps(graph.to_data(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def store_graph(data_dir: str, graph: Graph) -> str:
    """Writes `graph` under `data_dir`/graphs/<sha>.json.gz (once); its sha."""
    sha = graph_sha(graph)
    folder = os.path.join(data_dir, GRAPHS_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{sha}.json.gz")
    if not os.path.exists(path):
        text = json.dumps(graph.to_data(), sort_keys=True, separators=(",", ":"))
        tmp = f"{path}.tmp{os.getpid()}"
        with gzip.open(tmp, "wt", compresslevel=9) as f:
            f.write(text)
        os.replace(tmp, path)
    return sha


def load_graph(data_dir: str, sha: str) -> Graph:
    """The graph a record names."""
    with gzip.open(os.path.join(data_dir, GRAPHS_DIR, f"{sha}.json.gz"), "rt") as f:
        return graph_from_data(json.load(f))


def data_path(data_dir: str, card: str) -> str:
    return os.path.join(data_dir, f"{card}.jsonl")


def append_records(data_dir: str, card: str, records: Sequence[Mapping[str, Any]],
                   command: str = "") -> Dict[str, Any]:
    """Appends `records` (dicts with a "graph_data" `Graph` or a "graph" sha)
    to ``<data_dir>/<card>.jsonl``, storing their graphs; each record gets
    the card, `command` (where it has none) and the schema.

    Returns:
      {"path", "appended", "total"}.
    """
    os.makedirs(data_dir, exist_ok=True)
    path = data_path(data_dir, card)
    lines = []
    for r in records:
        rec = dict(r)
        graph = rec.pop("graph_obj", None)
        if graph is not None:
            rec["graph"] = store_graph(data_dir, graph)
        rec.setdefault("command", command)
        rec["card"] = card
        rec["schema"] = SCHEMA
        rec["schema_version"] = SCHEMA_VERSION
        lines.append(json.dumps(rec, sort_keys=True))
    with open(path, "a") as f:
        for line in lines:
            f.write(line + "\n")
    return {"path": path, "appended": len(lines), "total": len(read_records(data_dir, card))}


def write_records(data_dir: str, card: str, records: Sequence[Mapping[str, Any]]) -> None:
    """Rewrites a card's data file with `records` (already complete records,
    their graphs stored), atomically."""
    os.makedirs(data_dir, exist_ok=True)
    path = data_path(data_dir, card)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_records(data_dir: str, card: str) -> List[Dict[str, Any]]:
    """Every record of a card (empty if it has no data file)."""
    path = data_path(data_dir, card)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def merge(source_dir: str, data_dir: str = DATA_DIR,
          only: Optional[Sequence[str]] = None) -> Dict[str, int]:
    """Appends the records of another data folder (a GPU run's
    ``$OUT/gpu_times``) to `data_dir`, with their graphs; records already
    there (equal in every field) are not added twice.

    Args:
      source_dir: the folder to merge from.
      data_dir: the folder to merge into.
      only: these cards (default: every card of `source_dir` but "cpu",
        the dry run's).

    Returns:
      Per card, the records appended.
    """
    import shutil  # pylint: disable=import-outside-toplevel
    out: Dict[str, int] = {}
    for card in cards(source_dir):
        if (only is not None and card not in only) or (only is None and card == "cpu"):
            continue
        have = {json.dumps(r, sort_keys=True) for r in read_records(data_dir, card)}
        new = [r for r in read_records(source_dir, card)
               if json.dumps(r, sort_keys=True) not in have]
        folder = os.path.join(data_dir, GRAPHS_DIR)
        os.makedirs(folder, exist_ok=True)
        for sha in sorted({r["graph"] for r in new}):
            target = os.path.join(folder, f"{sha}.json.gz")
            if not os.path.exists(target):
                shutil.copyfile(os.path.join(source_dir, GRAPHS_DIR, f"{sha}.json.gz"), target)
        with open(data_path(data_dir, card), "a") as f:
            for r in new:
                f.write(json.dumps(r, sort_keys=True) + "\n")
        out[card] = len(new)
    return out


def cards(data_dir: str = DATA_DIR) -> List[str]:
    """The cards with a data file in `data_dir`."""
    if not os.path.isdir(data_dir):
        return []
    return sorted(f[:-6] for f in os.listdir(data_dir) if f.endswith(".jsonl"))


# -------------------------------------------------------------- collecting


def collect(config: CollectConfig, progress: Progress = None,
            on_record: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
    """Times the data set (`items`) in every precision until `max_seconds`.

    Args:
      config: what to time and how.
      progress: called with a line of text now and then.
      on_record: called with each record as it is made (e.g. to write it).

    Returns:
      {"records": records (each with "graph_obj", the `Graph`, for
       `append_records`), "versions", "seconds", "stopped_at" (the first
       item left untimed for lack of time, None if none), "failed" (item,
       dtype, mode, error)}.
    """
    start = time.time()
    records: List[Dict[str, Any]] = []
    failed: List[Dict[str, str]] = []
    stopped_at: Optional[str] = None
    version = versions(config.device)
    main_seconds = config.max_seconds - (config.compile_seconds
                                         if config.device == "cuda" else 0.0)
    compiled_items: List[Item] = []
    weights_cache: Dict[str, Dict[str, np.ndarray]] = {}
    for item in items(config, progress):
        if time.time() - start > main_seconds:
            stopped_at = f"{item.source} {item.name} {item.variant} b{item.batch}"
            break
        if (item.source == "zoo" and item.batch == min(config.batches)
                and item.graph.num_ops() <= COMPILE_MAX_OPS):
            compiled_items.append(item)
        feeds = feeds_of(item, config.seed, weights_cache)
        for dtype in config.dtypes:
            try:
                timed = time_item(item, dtype, config, feeds)
            except Exception as e:  # pylint: disable=broad-except
                failed.append(_failure(item, dtype, e))
                _say(progress, f"FAILED {item.name} {item.variant} b{item.batch} {dtype}: {e}")
                continue
            for mode, t in timed.items():
                records.append(_record(item, dtype, mode, t, version, on_record))
            _say(progress, f"{item.source:7s} {item.name:16s} {item.variant:14s} "
                           f"b{item.batch:<3d} {dtype:9s} "
                           + " ".join(f"{m}={t['median_ms']:.4f}ms" for m, t in timed.items()))
        _free(config.device)
    # torch.compile last, in its own time budget: a compilation that fails
    # cannot spoil the CUDA-graph timings above.
    compile_end = time.time() + config.compile_seconds
    compiled_items.sort(key=lambda it: it.graph.num_ops())
    for item in compiled_items if config.device == "cuda" else []:
        for dtype in config.dtypes:
            if time.time() > compile_end:
                break
            try:
                t = time_compiled(item, dtype, config,
                                  feeds_of(item, config.seed, weights_cache))
            except Exception as e:  # pylint: disable=broad-except
                failed.append(_failure(item, dtype, e, "compile"))
                _say(progress, f"FAILED compile {item.name} {dtype}: {e}")
                continue
            records.append(_record(item, dtype, "compile", t, version, on_record))
            _say(progress, f"compile {item.name:16s} b{item.batch:<3d} {dtype:9s} "
                           f"{t['median_ms']:.4f}ms (compiled in {t['compile_s']:.0f} s)")
        _free(config.device)
    return {"records": records, "versions": version, "seconds": time.time() - start,
            "stopped_at": stopped_at, "failed": failed}


def _failure(item: Item, dtype: str, e: Exception, mode: str = "graph") -> Dict[str, str]:
    return {"name": item.name, "variant": item.variant, "batch": str(item.batch),
            "dtype": dtype, "mode": mode, "error": f"{type(e).__name__}: {e}"[:300]}


def _record(item: Item, dtype: str, mode: str, t: Mapping[str, float],
            version: Mapping[str, Any],
            on_record: Optional[Callable[[Dict[str, Any]], None]]) -> Dict[str, Any]:
    rec = {"source": item.source, "name": item.name, "variant": item.variant,
           "batch": item.batch, "dtype": dtype, "mode": mode, "ops": len(item.graph.ops()),
           **t, "versions": dict(version), "graph_obj": item.graph}
    if on_record is not None:
        on_record(rec)
    return rec


def _free(device: str) -> None:
    if device != "cuda":
        return
    # pylint: disable=import-outside-toplevel
    import gc

    import torch
    gc.collect()
    torch.cuda.empty_cache()


def _say(progress: Progress, line: str) -> None:
    if progress is not None:
        progress(line)


def summary_table(records: Sequence[Mapping[str, Any]],
                  failed: Sequence[Mapping[str, Any]]) -> Tuple[str, List[dict], List[dict]]:
    """What a data run prints: per source, precision and batch, the graphs
    timed and their median time; then, per zoo graph, greedy's final graph
    against the original.

    Returns:
      (the Markdown text, the first table's rows, the second table's rows
      as {"graph", "dtype", "batch", "steps", "measured_change_pct"}).
    """
    lines = ["| source | dtype | batch | graphs | median ms |", "|---|---|---|---:|---:|"]
    groups: Dict[Tuple[str, str, int], List[float]] = {}
    for r in records:
        if r["mode"] in ("graph", "cpu", "reference"):
            groups.setdefault((r["source"], r["dtype"], r["batch"]), []).append(r["median_ms"])
    rows = []
    for (source, dtype, batch), times in sorted(groups.items()):
        lines.append(f"| {source} | {dtype} | {batch} | {len(times)} | "
                     f"{statistics.median(times):.4f} |")
        rows.append({"source": source, "dtype": dtype, "batch": batch, "graphs": len(times),
                     "median_ms": statistics.median(times)})
    final: Dict[Tuple[str, str, int], Tuple[int, float]] = {}
    for r in records:
        if r["source"] == "greedy" and r["mode"] in ("graph", "cpu", "reference"):
            key = (r["name"], r["dtype"], r["batch"])
            steps = int(r["variant"].split("@")[1])
            if key not in final or steps > final[key][0]:
                final[key] = (steps, r["median_ms"])
    base = {(r["name"], r["dtype"], r["batch"]): r["median_ms"] for r in records
            if r["source"] == "zoo" and r["mode"] in ("graph", "cpu", "reference")}
    lines += ["", "| graph | dtype | batch | greedy (analytic/v100) vs original |",
              "|---|---|---|---:|"]
    changes = []
    for key, (steps, ms) in sorted(final.items()):
        if key in base:
            pct = 100.0 * (ms - base[key]) / base[key]
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {pct:+.1f}% ({steps} steps) |")
            changes.append({"graph": key[0], "dtype": key[1], "batch": key[2],
                            "steps": steps, "measured_change_pct": pct})
    if failed:
        lines += ["", f"{len(failed)} failed: " + "; ".join(
            f"{f['name']} {f['variant']} b{f['batch']} {f['dtype']}: {f['error'][:80]}"
            for f in failed[:8])]
    return "\n".join(lines), rows, changes
