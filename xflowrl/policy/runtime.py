"""A trained graph policy's greedy acting in NumPy, without TensorFlow.

`xflowrl optimize --method=policy` plays one greedy episode of a trained
policy (`xflowrl.policy`). With the TensorFlow network that costs
the import of TensorFlow, Sonnet and graph_nets before the first step, and
a traced TensorFlow call per step on a single small graph
(benchmarks/policy_bench.py times both ways, `tf_*` and `cli`). This
module computes the same greedy choice from the same weights with NumPy
alone:

- `network_arrays(network)` reads a `PolicyValueNetwork`'s weights (graph
  states) into named arrays; `save_arrays` / `load_arrays` keep them as
  `policy.npz` in a policy folder (`save_policy` writes it beside the
  checkpoint).
- `NumpyPolicy(arrays)` acts: `act(observation)` is the network's greedy
  action (`Actor.act(observation, greedy=True)`): the encoder's K rounds
  (graph_nets' encode-process-decode, `xflowrl.embedding.encoder`), the xfer
  head over the unmasked xfers, then the location head over the chosen
  xfer's locations, each the argmax of its masked logits. Value heads are
  not needed to act and are not kept.

What it computes is the network's function written a second time, so it is
tested against the network (tests/policy/runtime_test.py): the same
logits to float32 rounding at every state along greedy episodes, and every
action it takes a greedy action of the network. Where two locations tie to
rounding (one rewrite at symmetric places) either may be taken, so an
episode can name other locations than the network's. The arrays are
float32, as the network's weights are.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
import threadpoolctl

from xflowrl.env.interface import Action, Episode, Observation, run_episode

ARRAYS_FILE = "policy.npz"
_ENCODER_PARTS = ("edge", "node", "global")
# A format tag inside the file, so a file of another layout is refused.
_FORMAT = 1


# -- weights -------------------------------------------------------------

def _linear(prefix: str, layer) -> Dict[str, np.ndarray]:
    return {f"{prefix}/w": layer.w.numpy(), f"{prefix}/b": layer.b.numpy()}


def _mlp_arrays(prefix: str, mlp) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for i, layer in enumerate(mlp._layers):  # pylint: disable=protected-access
        out.update(_linear(f"{prefix}/{i}", layer))
    return out


def _block_arrays(prefix: str, model) -> Dict[str, np.ndarray]:
    """An encoder `_mlp` (Sequential of MLP, LayerNorm)."""
    mlp, norm = model._layers  # pylint: disable=protected-access
    out = _mlp_arrays(prefix, mlp)
    out[f"{prefix}/scale"] = norm.scale.numpy()
    out[f"{prefix}/offset"] = norm.offset.numpy()
    out[f"{prefix}/eps"] = np.asarray(norm._eps, np.float32)  # pylint: disable=protected-access
    return out


def network_arrays(network) -> Dict[str, np.ndarray]:
    """The weights `NumpyPolicy` needs from a built graph-state
    `PolicyValueNetwork`, by name.

    Raises:
      ValueError: a vector-state network (the dream's controller).
    """
    if network.state_kind != "graph":
        raise ValueError("only graph-state policies act in the real environment")
    encoder = network.encoder
    arrays: Dict[str, np.ndarray] = {
        "format": np.asarray(_FORMAT, np.int32),
        "message_passing_steps": np.asarray(encoder.message_passing_steps, np.int32),
    }
    for stage, models in (("encoder", encoder._encoder_models()),  # pylint: disable=protected-access
                          ("core", encoder._models())):  # pylint: disable=protected-access
        for part, model in zip(_ENCODER_PARTS, models):
            arrays.update(_block_arrays(f"{stage}/{part}", model))
    # pylint: disable=protected-access
    arrays.update(_mlp_arrays("xfer_torso", network._xfer_torso))
    arrays.update(_linear("xfer_logits", network._xfer_logits))
    arrays.update(_mlp_arrays("xfer_scorer", network._xfer_scorer))
    arrays["xfer_embed"] = network._xfer_embed.embeddings.numpy()
    arrays.update(_mlp_arrays("location_scorer", network._location_scorer))
    arrays["relative_location_cost"] = np.asarray(network.relative_location_cost, bool)
    return arrays


def save_arrays(arrays: Mapping[str, np.ndarray], folder: str) -> str:
    """Writes `arrays` as `folder/policy.npz` (atomically); returns its path."""
    path = os.path.join(folder, ARRAYS_FILE)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return path


def load_arrays(folder: str) -> Dict[str, np.ndarray]:
    """`folder/policy.npz`.

    Raises:
      FileNotFoundError: the folder has none.
      ValueError: a file of another format, or of an older layout of it.
    """
    with np.load(os.path.join(folder, ARRAYS_FILE)) as f:
        arrays = {k: f[k] for k in f.files}
    if int(arrays.get("format", -1)) != _FORMAT:
        raise ValueError(f"{folder}/{ARRAYS_FILE}: not a policy of format {_FORMAT}")
    if "relative_location_cost" not in arrays:
        raise ValueError(f"{folder}/{ARRAYS_FILE}: a policy of format {_FORMAT} of an older "
                         "layout (no 'relative_location_cost'); this code reads the current "
                         "one only: save the policy again (save_policy)")
    return arrays


# -- the computation ------------------------------------------------------

def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


class _MLP:
    """snt.nets.MLP: ReLU between layers, after the last with `activate_final`."""

    def __init__(self, arrays: Mapping[str, np.ndarray], prefix: str, activate_final: bool):
        self.layers: List[Tuple[np.ndarray, np.ndarray]] = []
        while f"{prefix}/{len(self.layers)}/w" in arrays:
            i = len(self.layers)
            self.layers.append((arrays[f"{prefix}/{i}/w"], arrays[f"{prefix}/{i}/b"]))
        if not self.layers:
            raise ValueError(f"no layers named {prefix}/0/w in the policy's arrays")
        self.activate_final = activate_final

    def __call__(self, x: np.ndarray) -> np.ndarray:
        w, b = self.layers[0]
        return self.rest(x @ w + b)

    def rest(self, first: np.ndarray) -> np.ndarray:
        """The MLP given its first layer's output (bias included)."""
        last = len(self.layers) - 1
        x = _relu(first) if last > 0 or self.activate_final else first
        for i, (w, b) in enumerate(self.layers[1:], start=1):
            x = x @ w + b
            if i < last or self.activate_final:
                x = _relu(x)
        return x


class _Block:
    """An encoder `_mlp`: MLP (ReLU after every layer), then LayerNorm."""

    def __init__(self, arrays: Mapping[str, np.ndarray], prefix: str):
        self.mlp = _MLP(arrays, prefix, activate_final=True)
        self.scale, self.offset = arrays[f"{prefix}/scale"], arrays[f"{prefix}/offset"]
        self.eps = np.float32(arrays[f"{prefix}/eps"])
        self._mean = np.full((len(self.scale), 1), 1.0 / len(self.scale), np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self._norm(self.mlp(x))

    def rest(self, first: np.ndarray) -> np.ndarray:
        """The block given its first layer's output (bias included)."""
        return self._norm(self.mlp.rest(first))

    def _norm(self, h: np.ndarray) -> np.ndarray:
        # Row means as products with a [D, 1] column of 1/D: for these small
        # arrays, faster than numpy's reductions.
        centered = h - h @ self._mean
        variance = np.square(centered) @ self._mean
        return centered / np.sqrt(variance + self.eps) * self.scale + self.offset


class NumpyPolicy:
    """A trained graph policy's greedy action, in NumPy (module docstring)."""

    def __init__(self, arrays: Mapping[str, np.ndarray]):
        self.message_passing_steps = int(arrays["message_passing_steps"])
        self._encoders = [_Block(arrays, f"encoder/{p}") for p in _ENCODER_PARTS]
        self._core = [_Block(arrays, f"core/{p}") for p in _ENCODER_PARTS]
        self._xfer_torso = _MLP(arrays, "xfer_torso", activate_final=True)
        self._xfer_logits = (arrays["xfer_logits/w"], arrays["xfer_logits/b"])
        self._xfer_scorer = _MLP(arrays, "xfer_scorer", activate_final=False)
        self._xfer_embed = arrays["xfer_embed"]
        self._location_scorer = _MLP(arrays, "location_scorer", activate_final=False)
        self.relative_location_cost = bool(arrays["relative_location_cost"])
        self.num_xfers = self._xfer_embed.shape[0] - 1

    @classmethod
    def load(cls, folder: str) -> "NumpyPolicy":
        return cls(load_arrays(folder))

    # -- the network ---------------------------------------------------------

    def encode(self, state) -> Tuple[np.ndarray, np.ndarray]:
        """Node embeddings [n, D] and the graph embedding [1, D] of one
        graph's `GraphsTuple`: graph_nets' encode-process-decode, whose core
        blocks read [encoded, latent] of: edges, receiver nodes, sender nodes
        and globals (edge block); summed received edges, nodes and globals
        (node block); summed edges, summed nodes and globals (global block).

        As in `GraphEncoder._core_rounds`, each block's first layer is applied
        to the parts of its input separately (the encoded graph's once for
        all rounds, nodes before they are gathered onto edges), and each
        node's received edges are summed as a segment of the edges sorted by
        receiver (`_SegmentSum`)."""
        if len(state.n_node) != 1:
            raise ValueError("NumpyPolicy encodes one graph at a time")
        edge_enc, node_enc, global_enc = self._encoders
        edge_core, node_core, global_core = self._core
        e0, n0, g0 = edge_enc(state.edges), node_enc(state.nodes), global_enc(state.globals)
        d = e0.shape[1]
        senders, receivers = state.senders, state.receivers
        received = _SegmentSum(receivers, len(n0))
        (w_edge, b_edge), (w_node, b_node) = edge_core.mlp.layers[0], node_core.mlp.layers[0]
        # The encoded graph's share of each first layer (bias included).
        edge_fixed = (e0 @ w_edge[0:d] + b_edge + n0[receivers] @ w_edge[2 * d:3 * d]
                      + n0[senders] @ w_edge[4 * d:5 * d] + g0 @ w_edge[6 * d:7 * d])
        node_fixed = n0 @ w_node[d:2 * d] + g0 @ w_node[3 * d:4 * d] + b_node
        edges, nodes, globals_ = e0, n0, g0
        for _ in range(self.message_passing_steps):
            edges = edge_core.rest(
                edge_fixed + edges @ w_edge[d:2 * d] + (nodes @ w_edge[3 * d:4 * d])[receivers]
                + (nodes @ w_edge[5 * d:6 * d])[senders] + globals_ @ w_edge[7 * d:8 * d])
            nodes = node_core.rest(
                node_fixed + received(edges) @ w_node[0:d] + nodes @ w_node[2 * d:3 * d]
                + globals_ @ w_node[4 * d:5 * d])
            globals_ = global_core(np.concatenate([
                edges.sum(axis=0, keepdims=True), nodes.sum(axis=0, keepdims=True),
                g0, globals_], axis=1))
        return nodes, globals_

    def xfer_logits(self, graph_embedding: np.ndarray, xfer_summary: np.ndarray,
                    xfer_mask: np.ndarray) -> np.ndarray:
        """[N+1] logits of one state (masked xfers keep their base logit)."""
        w, b = self._xfer_logits
        logits = (self._xfer_torso(graph_embedding) @ w + b)[0]
        active = np.flatnonzero(xfer_mask)
        rows = np.concatenate([xfer_summary[active],
                               np.broadcast_to(graph_embedding, (len(active),
                                                                 graph_embedding.shape[1]))],
                              axis=1)
        logits[active] += self._xfer_scorer(rows)[:, 0]
        return logits

    def location_logits(self, nodes: np.ndarray, graph_embedding: np.ndarray, xfer: int,
                        location_nodes: np.ndarray, cost_delta: np.ndarray,
                        location_mask: np.ndarray) -> np.ndarray:
        """[L] logits of `xfer`'s locations (0 where masked)."""
        context = np.concatenate([graph_embedding[0], self._xfer_embed[xfer]])
        valid_locations = np.flatnonzero(location_mask)
        matched_ids = location_nodes[valid_locations]                  # [M, K]
        valid = (matched_ids >= 0)[..., None].astype(np.float32)
        matched = (nodes[np.maximum(matched_ids, 0)] * valid).sum(axis=1) / np.maximum(
            valid.sum(axis=1), 1.0)
        costs = [cost_delta[valid_locations, None]]
        if self.relative_location_cost:
            costs.append(relative_location_cost(cost_delta[valid_locations])[:, None])
        rows = np.concatenate([matched, *costs,
                               np.broadcast_to(context, (len(valid_locations), len(context)))],
                              axis=1)
        logits = np.zeros(len(location_mask), np.float32)
        logits[valid_locations] = self._location_scorer(rows)[:, 0]
        return logits

    # -- acting ---------------------------------------------------------------

    def act(self, observation: Observation) -> Action:
        """The greedy (xfer, location) of a real-environment observation."""
        return self._choose(observation)[0]

    def run_episode(self, env, greedy: bool = True, learn: bool = False) -> Episode:
        """`greedy_episode(self, env)`, in the call a `PPOAgent` answers, so
        that `xflowrl.generalist.evaluate` can evaluate the NumPy policy; it
        only acts greedily and never learns (ValueError otherwise)."""
        if not greedy or learn:
            raise ValueError("a NumpyPolicy only plays greedy episodes and does not learn")
        return greedy_episode(self, env)

    def log_probs(self, observation: Observation, action: Action) -> Tuple[float, float, bool]:
        """How likely the sampling policy (the network's masked softmaxes,
        `xflowrl.agents.ppo.acting`) is to take `action` at `observation`:
        the log-probability of its xfer, that of its location given the
        xfer (0 for NO-OP or an xfer without locations, as the actor records
        it), and whether it is the greedy action.

        Raises:
          ValueError: `action` is masked out.
        """
        xfer, location = (int(a) for a in action)
        greedy, nodes, graph_embedding, logits = self._choose(observation)
        if not observation.xfer_mask[xfer]:
            raise ValueError(f"xfer {xfer} is masked out")
        mask = observation.location_mask[xfer]
        location_log_p = 0.0
        if xfer != self.num_xfers and mask.any():
            if not mask[location]:
                raise ValueError(f"location {location} of xfer {xfer} is masked out")
            locations = observation.location_features()
            location_log_p = float(_masked_log_softmax(self.location_logits(
                nodes, graph_embedding, xfer, locations.nodes_of(xfer),
                locations.cost_delta_of(xfer), mask), mask)[location])
        return (float(_masked_log_softmax(logits, observation.xfer_mask)[xfer]), location_log_p,
                greedy == (xfer, location))

    def _choose(self, observation: Observation
                ) -> Tuple[Action, np.ndarray, np.ndarray, np.ndarray]:
        """The greedy action, the node and graph embeddings and the xfer logits."""
        locations = observation.location_features()
        if len(observation.xfer_mask) != self.num_xfers + 1:
            raise ValueError(f"the policy has {self.num_xfers} xfers, the environment "
                             f"{len(observation.xfer_mask) - 1}")
        nodes, graph_embedding = self.encode(observation.state)
        logits = self.xfer_logits(graph_embedding, locations.xfer_summary, observation.xfer_mask)
        xfer = int(_masked_argmax(logits, observation.xfer_mask))
        mask = observation.location_mask[xfer]
        if xfer == self.num_xfers or not mask.any():
            return (xfer, 0), nodes, graph_embedding, logits
        location_logits = self.location_logits(nodes, graph_embedding, xfer,
                                                locations.nodes_of(xfer),
                                                locations.cost_delta_of(xfer), mask)
        return ((xfer, int(_masked_argmax(location_logits, mask))), nodes, graph_embedding,
                logits)


def relative_location_cost(cost_delta: np.ndarray) -> np.ndarray:
    """Where each of one xfer's valid candidates lies between the cheapest
    and the costliest, (delta - min) / (max - min), 0 where all are equal:
    `PPOConfig.relative_location_cost`, as the network computes it
    (`xflowrl.agents.ppo.networks.relative_location_cost`), float32; at least one
    candidate."""
    low = cost_delta.min()
    spread = cost_delta.max() - low
    if spread <= 0:
        return np.zeros_like(cost_delta)
    return ((cost_delta - low) / spread).astype(np.float32)


class _SegmentSum:
    """Sums of edge rows per receiving node, as graph_nets'
    `received_edges_to_nodes_aggregator` (an unsorted segment sum): the
    edges sorted by receiver once per graph, then one `np.add.reduceat`
    per sum, where a dense [nodes, edges] incidence product would build a
    matrix of hundreds of thousands of entries on the larger graphs."""

    def __init__(self, receivers: np.ndarray, num_nodes: int):
        self._order = np.argsort(receivers, kind="stable")
        ordered = receivers[self._order]
        self._starts = np.flatnonzero(np.diff(ordered, prepend=-1))
        self._targets = ordered[self._starts]
        self._num_nodes = num_nodes

    def __call__(self, edges: np.ndarray) -> np.ndarray:
        out = np.zeros((self._num_nodes, edges.shape[1]), edges.dtype)
        if len(self._starts):
            out[self._targets] = np.add.reduceat(edges[self._order], self._starts, axis=0)
        return out


def _masked_argmax(logits: np.ndarray, mask: np.ndarray) -> int:
    """The first index of the largest unmasked logit (as `tf.argmax` of
    the masked log-softmax)."""
    return int(np.argmax(np.where(mask, logits, -np.inf)))


def _masked_log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Log-probabilities over the unmasked entries (-inf elsewhere), in
    float64."""
    masked = np.where(mask, logits.astype(np.float64), -np.inf)
    return masked - np.logaddexp.reduce(masked[mask])


def greedy_episode(policy: NumpyPolicy, env,
                   on_step: Optional[Callable[[int, float], None]] = None) -> Episode:
    """Plays `policy`'s greedy episode in `env`; its `Episode`.

    BLAS runs on one thread meanwhile: the products are a few hundred rows
    by 32 columns, too small to share out, and on this project's two-core
    machine OpenBLAS' threads slowed the episodes down.

    Args:
      on_step: called before each action after the first with the steps
        taken so far and the current cost (ms) (`env.steps`, `env.cost`:
        a real environment's), e.g. for a progress line.
    """
    act = policy.act
    if on_step is not None:
        def act(observation: Observation) -> Action:
            if env.steps:
                on_step(env.steps, env.cost)
            return policy.act(observation)
    with _blas().limit(limits=1):
        return run_episode(env, act)


_BLAS: List[threadpoolctl.ThreadpoolController] = []


def _blas() -> threadpoolctl.ThreadpoolController:
    """The BLAS libraries loaded (NumPy's), found once: looking them up
    takes milliseconds in a process that has loaded TensorFlow's libraries,
    limiting them afterwards microseconds."""
    if not _BLAS:
        _BLAS.append(threadpoolctl.ThreadpoolController().select(user_api="blas"))
    return _BLAS[0]
