"""Dumps every HiGHS program eqsat solves on some settings (arrays + start)."""
import os, pickle, sys, time
import numpy as np
from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.search.eqsat import EqsatConfig, equality_saturation, extract

out_dir = sys.argv[1]
settings = sys.argv[2:]
orig = extract._solve
current = {}

def dumping(program, start_choice, cpu_limit_s):
    k = current.setdefault("k", 0)
    current["k"] = k + 1
    m = program.matrix().tocsc()
    d = dict(num_vars=program.num_vars, num_rows=len(program.lower), cost=program.objective.copy(),
             lb=program.lb.copy(), ub=program.ub.copy(), rlo=np.array(program.lower), rhi=np.array(program.upper),
             indptr=m.indptr.copy(), indices=m.indices.copy(), data=m.data.copy(),
             integrality=program.integrality.copy(), cpu_limit=cpu_limit_s,
             start=None if start_choice is None else program.solution_of(start_choice))
    t = time.thread_time()
    r = orig(program, start_choice, cpu_limit_s)
    d["ref_status"], d["ref_cpu"] = r.status, r.cpu_seconds
    d["ref_obj"] = None if r.x is None else float(program.objective @ r.x)
    with open(os.path.join(out_dir, f"{current['name']}__{k}.pkl"), "wb") as f:
        pickle.dump(d, f)
    return r

extract._solve = dumping
model = cost_model_from_spec("analytic/v100", None)
for s in settings:
    g, rules = s.split("/")
    current["name"], current["k"] = s.replace("/", "__"), 0
    t = time.process_time()
    e = equality_saturation(zoo.get_graph(g), XferSet.from_name(rules), model, EqsatConfig(check_outputs=False))
    print(s, e.best_cost, e.ilp_status, round(time.process_time() - t, 2), flush=True)
