"""The learner of learning from search: a PPO network fitted to search targets.

`SearchLearner(folder, env, config)` loads a saved policy folder (the
shipped generalist, or one this learner saved) as the PPO agent's
`PolicyValueNetwork` (`xflowrl.policy.load_policy`), takes gradient steps
on minibatches of `SearchState`s (`xflowrl.planning.target_store`), and
saves a policy folder again (`save`), which `PolicyPrior`, `xflowrl
optimize --method=plan:DIR` and `--method=policy:DIR` load like any other.

One step minimises (AlphaZero's and MuZero's loss, by head)

  L = CE(pi_x, p_x) + location_coef * sum_x w_x CE(pi_l|x, p_l|x)
      + value_coef * 0.5 (V_x(s) - z)^2

- `CE(pi_x, p_x)`: cross-entropy of the xfer head's masked softmax over
  the real mask (NO-OP left out, as `PolicyPrior` leaves it out: stopping
  is the search's decision) against the search's xfer marginal;
- `CE(pi_l|x, p_l|x)`: the location head given xfer x, masked by x's real
  location mask, against the search's distribution over x's candidates,
  weighted by the target's marginal w_x of x (averaged over the batch's
  states);
- `z`: the value target (`search_targets`: points of the initial cost
  still to gain, the unit of the PPO value head's returns). The location
  value V_l(s, x) is not trained (the planner does not read it).

The whole network (encoder, both heads, the xfer value) is trained with
one Adam, its gradient clipped by global norm. The optimizer is made anew
per learner: an iteration of `xflowrl.planning.search_training` starts a
learner from the previous iteration's saved folder, so a resumed run
repeats an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from xflowrl.embedding import features
from xflowrl.env import GraphEnv
from xflowrl.nn import apply_adam, build_adam
from xflowrl.planning.target_store import SearchState
from xflowrl.policy.folder import PolicyInfo, read_info, save_policy


@dataclasses.dataclass(frozen=True)
class LearnConfig:
    """Settings of `SearchLearner`.

    Attributes:
      steps: gradient steps per `update`.
      batch_size: states per step (drawn without replacement per pass).
      learning_rate: Adam's (the generalist's X-RLflow setting, 5e-4).
      location_coef, value_coef: weights of the location and value losses.
        The value's errors are in points (tens of them early on, squared:
        hundreds) and the cross-entropies in nats (about one), and the
        planner reads the policy only: at 0.02 the value's gradient does not
        swamp the policy's under the global-norm clip.
      max_grad_norm: global-norm clip (None: none).
      compiled: run the steps as a `tf.function` (traced again as batch
        shapes vary, a few times at first: for a handful of steps eager
        is quicker).
      seed: the minibatch order's.
    """
    steps: int = 50
    batch_size: int = 16
    learning_rate: float = 5e-4
    location_coef: float = 1.0
    value_coef: float = 0.02
    max_grad_norm: Optional[float] = 0.5
    compiled: bool = True
    seed: int = 0

    def __post_init__(self):
        if self.steps < 0 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ValueError("steps must be >= 0, batch_size >= 1, learning_rate > 0")


class TargetBatch(NamedTuple):
    """Search states as tensors: B states, R location rows."""
    state: object            # graph_nets GraphsTuple of B graphs
    xfer_summary: object     # [B, N+1, S]
    xfer_mask: object        # [B, N+1] bool, the real mask
    policy_mask: object      # [B, N+1] bool, the real mask without NO-OP
    xfer_target: object      # [B, N+1]
    value_target: object     # [B]
    row_state: object        # [R] int32
    row_xfer: object         # [R] int32
    row_weight: object       # [R]
    location_nodes: object   # [R, L, K] int32, indices into the batch's nodes
    cost_delta: object       # [R, L]
    location_mask: object    # [R, L] bool
    location_target: object  # [R, L]


def make_batch(states: Sequence[SearchState]) -> TargetBatch:
    """Stacks `states` into a `TargetBatch` (one row per location target)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    f32 = lambda x: tf.constant(np.asarray(x, np.float32))
    offsets = features.node_offsets([s.state for s in states])
    xfer_mask = np.stack([s.xfer_mask for s in states])
    policy_mask = xfer_mask.copy()
    policy_mask[:, -1] = False
    row_state = np.concatenate([np.full(len(s.location_xfer), i, np.int32)
                                for i, s in enumerate(states)])
    nodes = np.concatenate([s.location_nodes for s in states])
    nodes = np.where(nodes >= 0, nodes + offsets[row_state][:, None, None], -1)
    return TargetBatch(
        state=features.to_tensors(features.batch([s.state for s in states])),
        xfer_summary=f32(np.stack([s.xfer_summary for s in states])),
        xfer_mask=tf.constant(xfer_mask), policy_mask=tf.constant(policy_mask),
        xfer_target=f32(np.stack([s.xfer_target for s in states])),
        value_target=f32([s.value_target for s in states]),
        row_state=tf.constant(row_state),
        row_xfer=tf.constant(np.concatenate([s.location_xfer for s in states]).astype(np.int32)),
        row_weight=f32(np.concatenate([s.location_weight for s in states])),
        location_nodes=tf.constant(nodes.astype(np.int32)),
        cost_delta=f32(np.concatenate([s.cost_delta for s in states])),
        location_mask=tf.constant(np.concatenate([s.location_mask for s in states])),
        location_target=f32(np.concatenate([s.location_target for s in states])))


def masked_cross_entropy(logits, mask, target):
    """[B] -sum_a target_a log softmax(logits over `mask`)_a: the target
    must be 0 outside `mask`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from xflowrl.agents.ppo import losses  # pylint: disable=import-outside-toplevel
    log_p = tf.nn.log_softmax(losses.masked_logits(logits, mask), axis=-1)
    return -tf.reduce_sum(tf.where(tf.cast(mask, tf.bool), target * log_p, 0.0), axis=-1)


class SearchLearner:
    """A policy folder's network, trained on search targets (module docstring)."""

    def __init__(self, folder: str, env: GraphEnv, config: Optional[LearnConfig] = None):
        import sonnet as snt  # pylint: disable=import-outside-toplevel

        from xflowrl.policy import load_policy  # pylint: disable=import-outside-toplevel
        self.config = config or LearnConfig()
        self.source = folder
        self.agent = load_policy(folder, env)
        self.network = self.agent.network
        self.optimizer = snt.optimizers.Adam(self.config.learning_rate)
        self.rng = np.random.default_rng(self.config.seed)
        self._step: Optional[Callable[[TargetBatch], Dict[str, Any]]] = None

    def losses(self, batch: TargetBatch) -> Dict[str, Any]:
        """The loss terms of `batch` (module docstring) as scalar tensors."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        from xflowrl.embedding.encoder import Embedding  # pylint: disable=import-outside-toplevel
        cfg, network = self.config, self.network
        embedding = network.encode(batch.state)
        xfer = network.xfer_head(embedding.globals, batch.xfer_summary, batch.xfer_mask)
        policy_xfer = tf.reduce_mean(masked_cross_entropy(xfer.logits, batch.policy_mask,
                                                          batch.xfer_target))
        size = tf.cast(tf.shape(batch.xfer_target)[0], tf.float32)
        # One row per (state, xfer) location target; none is fine (R = 0).
        rows = Embedding(nodes=embedding.nodes,
                         globals=tf.gather(embedding.globals, batch.row_state))
        location = network.location_head(rows, batch.row_xfer, batch.location_nodes,
                                         batch.cost_delta, location_mask=batch.location_mask)
        per_row = masked_cross_entropy(location.logits, batch.location_mask,
                                       batch.location_target)
        policy_location = tf.reduce_sum(per_row * batch.row_weight) / size
        value = 0.5 * tf.reduce_mean(tf.square(xfer.value - batch.value_target))
        loss = policy_xfer + cfg.location_coef * policy_location + cfg.value_coef * value
        return {"loss": loss, "policy_xfer": policy_xfer, "policy_location": policy_location,
                "value": value}

    def step(self, batch: TargetBatch) -> Dict[str, float]:
        """One gradient step on `batch`; the loss terms before it."""
        if self._step is None:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            from xflowrl.tracing import (  # pylint: disable=import-outside-toplevel
                use_reproducible_grappler,
            )
            use_reproducible_grappler()  # its own tf.function: the same in every process
            build_adam(self.optimizer, self.network.trainable_variables)
            self._step = (tf.function(self._step_impl, reduce_retracing=True)
                          if self.config.compiled else self._step_impl)
        return {k: float(v) for k, v in self._step(batch).items()}

    def _step_impl(self, batch: TargetBatch):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        variables = self.network.trainable_variables
        with tf.GradientTape() as tape:
            metrics = self.losses(batch)
        grads = tape.gradient(metrics["loss"], variables)
        grads = [tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)]
        if self.config.max_grad_norm:
            grads, _ = tf.clip_by_global_norm(grads, self.config.max_grad_norm)
        apply_adam(self.optimizer, grads, variables)
        return metrics

    def evaluate(self, states: Sequence[SearchState]) -> Dict[str, float]:
        """The loss terms on `states` (one batch), without a step."""
        return {k: float(v) for k, v in self.losses(make_batch(states)).items()}

    def update(self, states: Sequence[SearchState]) -> Dict[str, float]:
        """`config.steps` steps on minibatches of `states` (passes in a
        shuffled order); the mean of each loss term over them."""
        history: Dict[str, List[float]] = {}
        order: List[int] = []
        for _ in range(self.config.steps):
            if len(order) < min(self.config.batch_size, len(states)):
                order = list(self.rng.permutation(len(states)))
            take, order = order[:self.config.batch_size], order[self.config.batch_size:]
            for k, v in self.step(make_batch([states[i] for i in take])).items():
                history.setdefault(k, []).append(v)
        return {k: float(np.mean(v)) for k, v in history.items()}

    def save(self, folder: str, graphs: Sequence[str], command: str = "") -> None:
        """Writes the network as a policy folder, its `policy.json` the
        source folder's with `graphs` added to what it was trained on."""
        from xflowrl.policy.folder import current_commit  # pylint: disable=import-outside-toplevel
        info = read_info(self.source)
        if info is None:
            raise ValueError(f"{self.source}: no policy.json to derive the new folder's from")
        new = dataclasses.replace(info, graphs=list(dict.fromkeys(list(info.graphs)
                                                                  + list(graphs))),
                                  commit=current_commit(), command=command)
        save_policy(self.agent, folder, PolicyInfo(**dataclasses.asdict(new)))
