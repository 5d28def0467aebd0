"""Solves dumped programs under HiGHS option variants, interleaved; prints JSON lines."""
import glob, json, pickle, sys, time
import numpy as np
import highspy

QUIET = {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
              "mip_heuristic_run_root_reduced_cost": False,
              "mip_heuristic_run_feasibility_jump": False, "mip_heuristic_effort": 0.0}
VARIANTS = {
    "base": {},
    "presolve_off": {"presolve": "off"},
    "no_symmetry": {"mip_detect_symmetry": False},
    "heur0": {"mip_heuristic_effort": 0.0},
    "heur02": {"mip_heuristic_effort": 0.2},
    "no_fj": {"mip_heuristic_run_feasibility_jump": False},
    "no_restart": {"mip_allow_restart": False},
    "no_rins_rens": {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False},
    "no_probing_lift": {"mip_lifting_for_probing": 0},
    "no_rrc": {"mip_heuristic_run_root_reduced_cost": False},
    "no_submip": {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
                  "mip_heuristic_run_root_reduced_cost": False},
    "quiet": {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
              "mip_heuristic_run_root_reduced_cost": False,
              "mip_heuristic_run_feasibility_jump": False, "mip_heuristic_effort": 0.0},
    "quiet_norestart": {"mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
              "mip_heuristic_run_root_reduced_cost": False,
              "mip_heuristic_run_feasibility_jump": False, "mip_heuristic_effort": 0.0,
              "mip_allow_restart": False},
    "quiet_primal": dict(QUIET, simplex_strategy=4),
    "quiet_nosym": dict(QUIET, mip_detect_symmetry=False),
    "quiet_lift0": dict(QUIET, mip_lifting_for_probing=0),
    "quiet_rootpre": dict(QUIET, mip_root_presolve_only=True),
    "no_fj_heur0": {"mip_heuristic_run_feasibility_jump": False, "mip_heuristic_effort": 0.0},
}

def solve(d, opts, cpu_limit):
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = d["num_vars"], d["num_rows"]
    lp.col_cost_ = d["cost"]; lp.col_lower_, lp.col_upper_ = d["lb"], d["ub"]
    lp.row_lower_ = np.where(np.isinf(d["rlo"]), -highspy.kHighsInf, d["rlo"])
    lp.row_upper_ = np.where(np.isinf(d["rhi"]), highspy.kHighsInf, d["rhi"])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = d["indptr"]; lp.a_matrix_.index_ = d["indices"]; lp.a_matrix_.value_ = d["data"]
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in d["integrality"]]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", 4 * cpu_limit)
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.setOptionValue("threads", 1)
    for k, v in opts.items():
        assert h.setOptionValue(k, v) == highspy.HighsStatus.kOk, k
    t0 = time.thread_time()
    h.passModel(lp)
    if d["start"] is not None:
        s = highspy.HighsSolution(); s.col_value = list(d["start"]); s.value_valid = True
        h.setSolution(s)
    out = []
    def cb(e):
        if time.thread_time() - t0 >= cpu_limit:
            out.append(1); e.interrupt()
    h.cbMipInterrupt.subscribe(cb)
    h.run()
    cpu = time.thread_time() - t0
    st = h.getModelStatus()
    info = h.getInfo()
    obj = info.objective_function_value if info.primal_solution_status == 2 else None
    return {"cpu": cpu, "status": "optimal" if st == highspy.HighsModelStatus.kOptimal else ("cpu" if out else str(st)),
            "obj": obj, "nodes": info.mip_node_count}

files = sorted(glob.glob(sys.argv[1] + "/*.pkl"))
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
cap = float(sys.argv[4]) if len(sys.argv) > 4 else 1e9
for r in range(rounds):
    for f in files:
        d = pickle.load(open(f, "rb"))
        order = names if r % 2 == 0 else names[::-1]
        for v in order:
            res = solve(d, VARIANTS[v], min(d["cpu_limit"], cap))
            res.update(prog=f.split("/")[-1][:-4], variant=v, round=r, ref_status=d["ref_status"], ref_obj=d["ref_obj"], nvars=d["num_vars"], nrows=d["num_rows"])
            print(json.dumps(res), flush=True)
