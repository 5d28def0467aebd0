"""What the training benchmarks share: pinning to cores, and a clock that
times wrapped callables by label (`train_bench.py`, `world_model_bench.py`;
scripts of this folder import it as `timing`)."""

import os
import time
from typing import Any, Callable, Dict, List


def pin_cores(cores: int, tensorflow: bool = True) -> None:
    """Pins this process to its first `cores` CPUs and (unless `tensorflow`
    is False: a benchmark of what runs without it, which should not import
    it) TensorFlow to as many threads of each kind; call before TensorFlow
    runs anything. 0: no change."""
    if not cores:
        return
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))
    if not tensorflow:
        return
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(cores)


class Clock:
    """Wall time per label of the calls it wraps: `durations[label]` lists
    every call's seconds, `seconds[label]` their sum. Calls while
    `enabled` is False are not recorded."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.durations: Dict[str, List[float]] = {}

    @property
    def seconds(self) -> Dict[str, float]:
        return {label: sum(times) for label, times in self.durations.items()}

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.enabled:
                    self.durations.setdefault(label, []).append(time.perf_counter() - start)
        return timed
