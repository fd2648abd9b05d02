"""The planner (``laminar plan``): search cluster configurations with the simulator.

It sits above ``laminar.sim`` (which never imports it): ``space`` enumerates the points,
``screen`` rejects infeasible ones and estimates the rest analytically, ``search`` runs short
and then full simulations (``executors``: in process, local processes or Ray; ``evaluate``:
one simulation, cached by config hash), ``outputs`` writes ``plan.csv``, ``pareto.csv``,
``best.yaml`` and the Pareto plot.

    from laminar.config import load_config
    from laminar.plan import PlanOptions, SearchSpace, run_plan, write_plan
    base = load_config(preset="paper-math-7b")
    result = run_plan(base, SearchSpace(gpus=(1024,), systems=("laminar",)), PlanOptions(jobs=2))
    write_plan(result, "runs/plan")
"""

from laminar.plan.outputs import best_yaml, pareto_frame, top_table, write_plan, write_plan_into
from laminar.plan.search import PlanOptions, PlanResult, run_plan
from laminar.plan.space import SearchSpace

__all__ = [
    "PlanOptions",
    "PlanResult",
    "SearchSpace",
    "best_yaml",
    "pareto_frame",
    "run_plan",
    "top_table",
    "write_plan",
    "write_plan_into",
]
