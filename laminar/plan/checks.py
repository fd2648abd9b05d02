"""What a plan checks before any work: the size of its grid, and the cost files it would use.

**The bound.** A grid is a product, so a few flags make millions of points (``--vary`` five keys
of ten values each: 10^5 x the rest). :func:`check_bound` counts the points without building
them and refuses more than ``max_points`` (default :data:`MAX_POINTS`), naming the count, a
rough CPU-time estimate and ``--max-points N`` to go on. 4,096 holds the default grid (every
system x 7 splits x TP 1/2/4/8 x 3 batch bounds x repack: up to 432 points a GPU count) at nine
GPU counts; at the measured cost below that is 10-20 CPU-minutes (about half the points are
usually screened out), past which a plan deserves a decision.

**The estimate** (:func:`estimate_cpu_s`): per point, the screen (~6 ms: config, memory fit,
analytic estimate) and one short simulation, ~0.26 CPU-s for ``paper-math-7b`` at 1024 GPUs
(8,192 trajectories a step, 4 steps: benchmarks/RESULTS.md, "A large plan": 74 CPU-s for 290
simulations), scaled by trajectories x short steps, plus ~30 ms of set-up. Points screened out
are never simulated, so this is an upper figure; it is not a promise.

**Cost files.** A cost file written by ``laminar calibrate`` describes one local CPU job: with
it (``sim.setting`` ``auto`` or ``runtime``) the simulator runs the job ``laminar train`` would,
from the config's ``runtime`` section, whatever the point's GPUs, system, split, TP or batch
bound: every point would be that one job. :func:`check_costs` refuses such a plan, and
``sim.setting: runtime`` itself. A cluster cost file (``cost_model.json`` of a run directory,
or a calibrated file with ``sim.setting: cluster``) fixes the model's and hardware's
coefficients: the plan honours GPUs, systems, splits and batch bounds with it, rejects
rollout TPs other than the file's replica (``laminar.plan.screen``), and refuses to vary the
keys the coefficients replace (:data:`COST_FIXED_KEYS`): they would change the memory check at
most, never a simulated figure.
"""

from __future__ import annotations

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.plan.space import SearchSpace, count_points

MAX_POINTS = 4096
"""Default bound on a plan's points (module docstring)."""
MAX_POINTS_CEILING = 100_000
"""Largest ``--max-points``: a point holds ~20 KB while the plan runs (2 GB here), and its
screen alone takes ~6 ms (10 minutes); a larger search is several plans."""

SCREEN_S = 0.006
SETUP_S = 0.03
SHORT_SIM_S = 0.26
SHORT_SIM_TRAJECTORIES = 512 * 16 * 4

COST_FIXED_KEYS = (
    "cluster.hardware",
    "cluster.hardware_spec",
    "model.name",
    "model.hf_config",
    "model.spec",
    "model.dtype",
    "model.rollout_quant",
    "model.rollout_eager",
    "sim.gpu_memory_utilization",
)
"""Keys whose effect on a simulation is through the cost model's coefficients
(``laminar.sim.costdata.cost_model_for``), which a cost file replaces."""


def estimate_cpu_s(base: LaminarConfig, points: int, short_steps: int) -> float:
    """Rough CPU seconds of a plan of ``points`` points (module docstring)."""
    w = base.workload
    trajectories = w.prompts_per_step * w.samples_per_prompt * min(short_steps, w.steps)
    per_sim = SETUP_S + SHORT_SIM_S * trajectories / SHORT_SIM_TRAJECTORIES
    return points * (SCREEN_S + per_sim)


def duration(seconds: float) -> str:
    """``seconds`` in the largest unit that keeps it above one (``2.5 CPU-hours``)."""
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} CPU-{unit}"
    return f"{seconds:.2g} CPU-seconds"


def check_bound(base: LaminarConfig, space: SearchSpace, max_points: int, short_steps: int) -> int:
    """The number of points of ``space``; ConfigError when it is above ``max_points``."""
    n = count_points(base, space)
    if n > max_points:
        est = duration(estimate_cpu_s(base, n, short_steps))
        go_on = (
            f"or pass --max-points {n} to go on" if n <= MAX_POINTS_CEILING
            else f"or split it into plans of at most {MAX_POINTS_CEILING:,} points"
        )  # fmt: skip
        raise ConfigError(
            "laminar plan",
            "--max-points",
            f"the grid has {n:,} points (roughly {est} to screen and simulate), more than the "
            f"bound of {max_points:,}; narrow --gpus, --systems, --trainer-fractions, --tp, "
            f"--max-batch, --repack or --vary, {go_on}",
        )
    return n


def check_costs(base: LaminarConfig, space: SearchSpace) -> None:
    """Refuse cost files a plan cannot honour (module docstring); read each one with bounds,
    so a FIFO, a huge or a malformed file is one error line naming it."""
    files = [str(f) for f in space.extra.get("sim.cost_file", (base.sim.cost_file,)) if f]
    settings = [str(s) for s in space.extra.get("sim.setting", (base.sim.setting,))]
    if "runtime" in settings:
        raise ConfigError("laminar plan", "sim.setting", _RUNTIME_JOB + "; plan with "
                          "sim.setting auto or cluster")  # fmt: skip
    for path in dict.fromkeys(files):
        _check_cost_file(base, path, "auto" in settings)
    if files:
        for key in space.extra:
            if any(key == k or key.startswith(k + ".") for k in COST_FIXED_KEYS):
                raise ConfigError(
                    f"--vary {key}", "", f"with sim.cost_file the cost model's coefficients "
                    f"come from the file, and {key} reaches the simulation only through them: "
                    "every value would simulate the same figures; vary sim.cost_file over "
                    "files instead"
                )


_RUNTIME_JOB = (
    "a runtime setting simulates the one local job `laminar train` runs (runtime.rollouts "
    "replicas on CPU cores, the trainer on its cores), not a cluster configuration: every "
    "point of the plan would be that job"
)


def _check_cost_file(base: LaminarConfig, path: str, auto: bool) -> None:
    from laminar.inputfile import MiB, load_json
    from laminar.sim.cost import load_cost_file
    from laminar.sim.local import is_runtime_setting

    # regular, bounded, JSON (a calibration's fit report may hold NaN; coefficients are checked)
    load_json(path, kind="cost file", max_bytes=16 * MiB, allow_nan=True)
    load_cost_file(path)  # its coefficients (ConfigError naming the file and coefficient)
    sim = base.sim.model_copy(update={"cost_file": path, "setting": "auto"})
    if auto and is_runtime_setting(base.model_copy(update={"sim": sim})):
        raise ConfigError(
            path, "", f"written by `laminar calibrate` for a local job (sim.setting auto "
            f"reads it as runtime): {_RUNTIME_JOB}; simulate that job with `laminar simulate "
            "--cost`, or plan without the cost file"
        )
