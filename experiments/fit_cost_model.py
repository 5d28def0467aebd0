"""Fits the fitted cost backend's coefficients to onnxruntime on this machine.

    python experiments/fit_cost_model.py [--method=micro] [--budget=full]
        [--output=xflowrl/engine/data/fitted_cpu.json]
    python experiments/fit_cost_model.py --method=profile [--graphs=...] [--runs=20]
    python experiments/fit_cost_model.py --refit_from=<earlier profile output> [--hold_out=...]

Two methods (docs/runtime.md, "A cost model fitted from micro-benchmarks"):

- `micro` (default): `xflowrl.measure.calibration.calibrate`: micro-models
  of every op class over generic grids of shapes, and the training graphs
  with their greedy variants, timed end to end; one joint fit over all
  classes. `--budget` quick (about a minute) or full.
- `profile` (per-kernel profiles of whole graphs): `xflowrl.measure.profile_fit`:
  every graph of `--graphs` and its greedy and TASO variants under
  `--optimize_with` run with onnxruntime's profiler on; per-class fits of
  the profiled kernels, and the executor's overhead fitted over the graphs
  and folded in. `--refit_from` refits such a file's stored rows without
  profiling; `--hold_out` leaves graphs' rows out.

Output: a JSON profile that `CostModel("fitted", profile=<path>)` loads.
"""

from __future__ import annotations

import json

from absl import app, flags, logging

from xflowrl.engine import XferSet
from xflowrl.engine.cost import DEFAULT_COST_SPEC, fitted_profile_path
from xflowrl.engine.xfers import TASO_BUDGET
from xflowrl.measure import calibration, cost_fit, profile_fit
from xflowrl.rules.sets import DEFAULT_RULE_SET

FLAGS = flags.FLAGS
flags.DEFINE_enum("method", "micro", ["micro", "profile"], "micro: calibration.calibrate "
                  "(micro-benchmarks + training graphs, end to end); profile: per-kernel "
                  "profiles of --graphs and their variants.")
flags.DEFINE_enum("budget", "full", sorted(calibration.BUDGETS), "micro: how much to measure.")
flags.DEFINE_list("graphs", list(calibration.TRAINING_GRAPHS), "profile: zoo graphs to profile.")
flags.DEFINE_list("optimize_with", [DEFAULT_COST_SPEC], "profile: cost models whose greedy and "
                  "TASO variants are profiled too.")
flags.DEFINE_list("taso_graphs", ["squeezenet1_1", "resnet18", "resnet50", "bert",
                                  "resnet50_taso"],
                  "profile: graphs whose TASO variant is profiled (TASO on inception_v3 "
                  "takes minutes).")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "profile: TASO search budget.")
flags.DEFINE_integer("runs", 20, "profile: profiled runs per graph and pass.")
flags.DEFINE_integer("passes", 2, "profile: interleaved passes over all graphs.")
flags.DEFINE_integer("seed", 0, "Weights, inputs (and micro: sampled configurations).")
flags.DEFINE_string("output", fitted_profile_path("cpu"), "Where the profile goes.")
flags.DEFINE_list("hold_out", [], "profile/refit: graphs whose rows (original and variants) "
                  "are left out of the fit.")
flags.DEFINE_string("refit_from", "", "Profile nothing: refit from the rows and graph times "
                    "stored in an earlier --method=profile output file.")


def config_from_flags() -> profile_fit.ProfileFitConfig:
    """--method=profile's settings from the flags."""
    return profile_fit.ProfileFitConfig(
        graphs=tuple(FLAGS.graphs), optimize_with=tuple(FLAGS.optimize_with),
        taso_graphs=tuple(FLAGS.taso_graphs), taso_budget=FLAGS.taso_budget, runs=FLAGS.runs,
        passes=FLAGS.passes, seed=FLAGS.seed)


def main(argv):
    del argv
    if FLAGS.method == "micro" and not FLAGS.refit_from:
        result = calibration.calibrate(FLAGS.output, budget=FLAGS.budget, seed=FLAGS.seed,
                                       progress=logging.info)
        print(json.dumps(result, indent=1))
        return
    if FLAGS.refit_from:
        with open(FLAGS.refit_from) as f:
            earlier = json.load(f)
        try:
            profiled = profile_fit.refit_source(earlier, FLAGS.refit_from)
        except ValueError as e:
            raise app.UsageError(str(e)) from e
    else:
        profiled = profile_fit.profile(config_from_flags(), XferSet.from_name(DEFAULT_RULE_SET),
                                       progress=logging.info)
    profiled = profile_fit.held_out(profiled, FLAGS.hold_out)
    report = profile_fit.fitted_profile(profiled, calibration.machine())
    cost_fit.write_profile(FLAGS.output, report)
    print(json.dumps({k: report[k] for k in profile_fit.SUMMARY_KEYS}, indent=1))


if __name__ == "__main__":
    app.run(main)
