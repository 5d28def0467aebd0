"""Search states with their targets, and their store on disk.

A `SearchState` is one real graph a planner expanded, with what the
network reads of it (the observation's graph features, xfer summary and
real mask, and the location features of the xfers that have a location
target) and the targets the search gave it (`xflowrl.planning.
search_targets`). It keeps the graph itself too (`Graph.to_data`), so
that a later search can start from it again (reanalyse).

`TargetStore(folder)` keeps states as numbered parts (`part-00000.pkl`,
...), each written once, atomically; `replace` rewrites a part whose
targets were refreshed. Reopening a folder finds its parts, so a run that
stops resumes with what it stored.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

_PART = "part-{:05d}.pkl"


class SearchState(NamedTuple):
    """One searched graph: the network's inputs and the search's targets.

    X below is the number of xfers with a location target, L the location
    limit, K the most ops a location matches.
    """
    graph: str                  # the source graph's name (a corpus member)
    graph_data: Dict[str, Any]  # `Graph.to_data()`, for reanalyse
    cost: float                 # ms
    initial_cost: float         # ms, of the source graph
    root: bool                  # a graph a decision was taken from
    state: Any                  # `xflowrl.embedding.features.GraphsTuple` (numpy)
    xfer_summary: np.ndarray    # [N+1, S] float32
    xfer_mask: np.ndarray       # [N+1] bool, the real mask (NO-OP included)
    xfer_target: np.ndarray     # [N+1] float32, NO-OP 0
    location_xfer: np.ndarray   # [X] int32
    location_weight: np.ndarray  # [X] float32, the xfer's marginal
    location_nodes: np.ndarray  # [X, L, K] int32 (-1 pads)
    cost_delta: np.ndarray      # [X, L] float32
    location_mask: np.ndarray   # [X, L] bool, the real mask of that xfer
    location_target: np.ndarray  # [X, L] float32, sums to 1 over the mask
    value_target: float         # points of the initial cost still to gain


class TargetStore:
    """Search states on disk, part by part (module docstring)."""

    def __init__(self, folder: str):
        self.folder = folder
        os.makedirs(folder, exist_ok=True)

    def parts(self) -> List[int]:
        """The numbers of the parts stored, in order."""
        out = []
        for name in os.listdir(self.folder):
            if name.startswith("part-") and name.endswith(".pkl"):
                out.append(int(name[5:10]))
        return sorted(out)

    def _path(self, part: int) -> str:
        return os.path.join(self.folder, _PART.format(part))

    def add(self, states: List[SearchState]) -> int:
        """Writes `states` as the next part; returns its number."""
        parts = self.parts()
        part = parts[-1] + 1 if parts else 0
        self.replace(part, states)
        return part

    def replace(self, part: int, states: List[SearchState]) -> None:
        """Writes `states` as part `part` (atomically)."""
        tmp = self._path(part) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump([s._asdict() for s in states], f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self._path(part))

    def read(self, part: int) -> List[SearchState]:
        with open(self._path(part), "rb") as f:
            return [SearchState(**s) for s in pickle.load(f)]

    def load(self, parts: Optional[List[int]] = None) -> List[SearchState]:
        """The states of `parts` (None: all), part by part."""
        return [s for p in (self.parts() if parts is None else parts) for s in self.read(p)]

    def __len__(self) -> int:
        return sum(len(self.read(p)) for p in self.parts())
