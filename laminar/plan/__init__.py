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

import importlib

_HOMES = {
    "PlanOptions": "laminar.plan.search",
    "PlanResult": "laminar.plan.search",
    "run_plan": "laminar.plan.search",
    "SearchSpace": "laminar.plan.space",
    "best_yaml": "laminar.plan.outputs",
    "pareto_frame": "laminar.plan.outputs",
    "top_table": "laminar.plan.outputs",
    "write_plan": "laminar.plan.outputs",
    "write_plan_into": "laminar.plan.outputs",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    # Imported on first use: the CLI reads the plan's bounds (``laminar.plan.checks``) while
    # building its parser, and ``laminar --help`` must not wait for pandas.
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'laminar.plan' has no attribute {name!r}")
