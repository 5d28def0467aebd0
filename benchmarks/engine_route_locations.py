"""Whether the engine planner's route lies in the world-model planner's
action space; prints JSON.

    python benchmarks/engine_route_locations.py --setting=squeezenet1_1/tensat/analytic-v100@b16
        [--engine_prior=cost] [--seed=0] [--depth=6]

1. The engine planner (`xflowrl.planning.plan`, multi-location actions on,
   `--engine_prior`, budget 1,000) runs on the setting; its route (one
   rewrite per step, the rule set's locations) is replayed, and every step
   after greedy's graph says whether its location was its xfer's cheapest
   (each candidate built and costed).
2. From greedy's graph (`xflowrl.search.greedy.greedy_walk`), every
   sequence of at most `--depth` of the model's actions with
   cheapest-location actions on (`xflowrl.planning.model.model_actions`)
   is built, each graph once: the cheapest graph reached and its actions.
"""

from __future__ import annotations

import json

from absl import app, flags
import numpy as np

from xflowrl.planning import EngineSimulator, PlanConfig, plan
from xflowrl.planning.model import model_actions
from xflowrl.search.greedy import greedy_walk
from xflowrl.search.settings import get_setting

FLAGS = flags.FLAGS
flags.DEFINE_string("setting", "squeezenet1_1/tensat/analytic-v100@b16", "a setting name")
flags.DEFINE_string("engine_prior", "cost", "the engine planner's prior")
flags.DEFINE_integer("seed", 0, "the engine planner's seed")
flags.DEFINE_integer("depth", 6, "actions from greedy's graph at most")


def main(argv):
    del argv
    setting = get_setting(FLAGS.setting)
    env = setting.environment()
    points = 100.0 / env.initial_cost
    greedy = greedy_walk(env)
    engine = plan(env, PlanConfig(prior=FLAGS.engine_prior, everywhere=True,
                                  max_real_steps=1000, time_limit_s=600.0, seed=FLAGS.seed))
    graph, past_greedy, steps = env.initial_graph, False, []
    for name, location in engine.applied:
        xfer = env.xfers.names.index(name)
        locations = env.xfers.locations(graph, env.config.max_locations, env.max_ops)
        costs = [locations.apply(xfer, i).cost(env.cost_model)
                 for i in range(int(locations.count_array[xfer]))]
        graph = locations.apply(xfer, location)
        if past_greedy:
            steps.append({"xfer": name, "location": int(location), "locations": len(costs),
                          "change_pct": points * graph.cost(env.cost_model) - 100,
                          "cheapest_location": int(np.argmin(costs)),
                          "cheapest_change_pct": points * min(costs) - 100,
                          "is_cheapest": costs[location] <= min(costs) + 1e-12})
        past_greedy = past_greedy or graph.hash() == greedy.graph.hash()

    sim = EngineSimulator.of(env)
    n = len(env.xfers)
    frontier = [(greedy.cost, greedy.graph, [])]
    seen = {greedy.graph.hash()}
    best = (greedy.cost, [])
    for _ in range(FLAGS.depth):
        following = []
        for cost, parent, names in frontier:
            expansion = sim.expand(parent, cost, everywhere=True)
            actions, rows = model_actions(expansion, n, single_actions=True)
            for action, row in zip(actions, rows):
                child, _ = sim.child(expansion, int(row))
                if child.hash() in seen:
                    continue
                seen.add(child.hash())
                child_cost = child.cost(env.cost_model)
                label = env.xfers.names[action % n] + (" (cheapest)" if action >= n else "")
                following.append((child_cost, child, names + [label]))
                if child_cost < best[0]:
                    best = (child_cost, names + [label])
        frontier = following
    print(json.dumps({
        "setting": setting.name, "greedy_change_pct": points * greedy.cost - 100,
        "engine_change_pct": engine.change_pct, "engine_steps": len(engine.applied),
        "engine_reaches_greedy_graph": past_greedy, "engine_steps_past_greedy": steps,
        "depth": FLAGS.depth, "graphs_built": len(seen), "expansions": sim.real_steps,
        "best_from_greedy_change_pct": points * best[0] - 100,
        "best_from_greedy_actions": best[1]}, indent=1))


if __name__ == "__main__":
    app.run(main)
