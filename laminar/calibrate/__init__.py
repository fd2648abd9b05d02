"""``laminar calibrate``: fit the simulator's cost model to real runs (reads files only).

``calibrate(run_dirs)`` reads ``laminar train`` run directories (``laminar.calibrate.rundir``),
fits every coefficient of ``laminar.sim.cost`` (``laminar.calibrate.fit``) and returns a cost
file's content: the coefficients with their sources, the fit quality of each term, and a
``runtime`` block (trainer rate per thread count) that makes ``laminar simulate`` rebuild the
runtime's own job (``laminar/sim/local.py``), and the ``ranges`` of batch, KV tokens and lengths
the fit saw (``laminar.calibrate.ranges``). It imports no runtime code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from laminar.calibrate import background, drift, speed
from laminar.calibrate.answers import policy_lengths
from laminar.calibrate.coldstart import fit_first_prompts, fit_first_step
from laminar.calibrate.fit import (
    Fit,
    fit_engine,
    fit_refill,
    fit_trainer,
    fit_transfer,
    train_flops,
)
from laminar.calibrate.ranges import calibrated_ranges
from laminar.calibrate.rundir import RunData, RunDirError, read_run
from laminar.costfile import check_cost_content
from laminar.errors import ConfigError
from laminar.sim.cost import COEFFICIENT_UNITS, Coefficient, CostModel

__all__ = ["RunDirError", "calibrate", "check_fitted", "cost_file_json", "read_run"]


def _check_same(runs: list[RunData]) -> None:
    """Every run must come from the same machine and model (one cost file describes one)."""
    first = runs[0]
    for key in ("cpu_model", "params", "weight_bytes", "model", "kv_capacity_tokens"):
        for run in runs[1:]:
            if run.machine.get(key) != first.machine.get(key):
                raise RunDirError(
                    f"{run.path / 'profile' / 'machine.json'}: {key} is "
                    f"{run.machine.get(key)!r} but {first.machine.get(key)!r} in {first.path}; "
                    "calibrate runs of one machine and model at a time"
                )


def calibrate(
    run_dirs: Sequence[str | Path], lengths_from: Sequence[str | Path] = ()
) -> tuple[dict, list[Fit]]:
    """(cost file content, the fits) for the runs in ``run_dirs``. ``lengths_from``: runs
    whose policy's answers make the cost file's ``policy_lengths`` instead of the calibration
    runs' (a short run of the job to predict: its policy, warmed up on its own task, is not
    the calibration runs'; docs/fidelity.md, *Issue 31*)."""
    if not run_dirs:
        raise RunDirError("no run directory given")
    runs = [read_run(p) for p in run_dirs]
    _check_same(runs)
    probes = [read_run(p) for p in lengths_from]
    if probes:
        _check_same([runs[0], *probes])
    # Each run's engine and trainer seconds at the runs' mean machine speed (the probe's)
    k, ref = speed.factors(runs)
    try:
        # What other processes took of the engines' cores, where the runs recorded it
        # (``laminar.calibrate.background``): the cross-core factor's mechanism, measured.
        cross = background.measure(runs)
        engine = fit_engine(runs, k)
        trainers = fit_trainer(runs, speed=k)
        cpu = fit_trainer(runs, "train_cpu_s", k)
        transfers = fit_transfer(runs)
        refill = fit_refill(runs)
        first_step, first_prompts = fit_first_step(runs, trainers, k), fit_first_prompts(runs)
    except ValueError as e:
        raise RunDirError(f"{', '.join(str(r.path) for r in runs)}: {e}") from None
    if not trainers:
        raise RunDirError(f"{runs[0].path}: no trainer step recorded in any run")
    cold = [*first_step.values(), first_prompts]
    measured = [] if cross is None else [cross.fit()]
    # How far a probe's lengths (``lengths_from``) may be from a longer job's (``drift``).
    moved = drift.measure(runs, probes)
    measured += [] if moved is None else [moved]
    fits = [engine, *measured, *trainers, *cpu, *transfers, refill, *cold]
    content = _cost_content(runs, engine, trainers, transfers, refill, normalised=k is not None)
    # The job's cold start (``laminar.calibrate.coldstart``): outside the figures' window, it
    # sets how far the rollouts are ahead when the window opens.
    content["runtime"]["trainer_first_step_extra_s_by_threads"] = {
        str(t): f.values["trainer_first_step_extra_s"] for t, f in first_step.items()
    }
    content["runtime"]["first_prompts_s"] = first_prompts.values["first_prompts_s"]
    content["fit"].update({f.name: asdict(f) for f in [*cold, *measured]})
    if cross is not None and cross.gamma() is not None:
        content["runtime"]["cross_core_gamma_measured"] = cross.gamma()
    # The trainer's CPU seconds (not what the simulator charges: what a step costs with its
    # cores to itself; wall = CPU / the CPU share the machine gives it).
    content["runtime"]["trainer_cpu"] = {
        f.note: {"flop_per_s": f.values["train_flop_per_s"],
                 "step_base_s": f.values["train_step_base_s"]} for f in cpu
    }  # fmt: skip
    content["fit"].update({f.name: asdict(f) for f in cpu})
    if ref is not None:  # the machine's speed the coefficients hold at
        content["runtime"]["speed_reference"] = ref
    # What the fit saw of batch, KV and lengths: `simulate --cost` warns outside it.
    content["ranges"] = calibrated_ranges(runs)
    # How the policy answered its task: the simulator's task lengths (``answers``).
    answers = policy_lengths(probes or runs)
    if probes and answers is None:
        raise RunDirError(f"{', '.join(str(r.path) for r in probes)}: no repeat task with a "
                          "trace of prompt ids and responses: nothing to measure lengths from")
    if answers is not None:
        content["policy_lengths"] = answers
    check_fitted(content, run_dirs)
    return content, fits


def check_fitted(content: dict, run_dirs: Sequence[str | Path]) -> None:
    """Refuse to write a cost file that ``laminar simulate`` would refuse to read (a fit gone
    astray: a rate out of any machine's range), naming the runs (``laminar.costfile``)."""
    try:
        check_cost_content(json.loads(cost_file_json(content)), "the fitted cost file")
    except ConfigError as e:
        runs = ", ".join(str(p) for p in run_dirs)
        raise RunDirError(f"{runs}: {e}; the runs do not fit a plausible cost model") from None


def _cost_content(runs: list[RunData], engine: Fit, trainers: list[Fit], transfers: list[Fit],
                  refill: Fit, *, normalised: bool = False) -> dict:  # fmt: skip
    m = runs[0].machine
    where = f"fitted to {len(runs)} run(s) by laminar calibrate"
    timed = where + (", each run's seconds at their mean machine speed" if normalised else "")
    f1, f2 = train_flops(runs[0])
    base = max(trainers, key=lambda f: f.samples)  # the rate of the most measured placement
    values: dict[str, tuple[float, str]] = {
        "replica_gpus": (1, "one engine replica (its cores are the runtime's placement)"),
        "weight_bytes": (float(m["weight_bytes"]), "the published state dict (machine.json)"),
        "kv_capacity_tokens": (int(m["kv_capacity_tokens"]), "vLLM's KV blocks x block size"),
        "prefill_base_s": (0.0, "prefill runs inside a decode step: no base of its own"),
        "prefill_per_token_sq_s": (0.0, "not identifiable from prompts this short"),
        "train_flop_per_token": (f1, "8 x params (laminar.sim.costdata counting)"),
        "train_flop_per_token_sq": (f2, "8 x layers x hidden (laminar.sim.costdata counting)"),
        "train_flop_per_s_per_gpu": (
            base.values["train_flop_per_s"],
            f"trainer with {base.note} thread(s), {timed}",
        ),
        "nvlink_bytes_per_s": (transfers[1].values["pcie_bytes_per_s"], "unused: one machine"),
        "rdma_startup_s": (0.0, "a local copy: no message start-up"),
    }
    for name, v in engine.values.items():
        if name in COEFFICIENT_UNITS:  # the others go into the runtime block
            values[name] = (v, f"engine-step least squares, {timed}")
    for fit in transfers:
        for name, v in fit.values.items():
            values[name] = (v, f"{fit.name}: {fit.note}, {where}")
    coeffs = {
        name: Coefficient(float(values[name][0]), unit, values[name][1])
        for name, unit in COEFFICIENT_UNITS.items()
    }
    model = CostModel(coeffs, f"calibrated: {m['cpu_model'] or 'cpu'} / {m['model']}")
    content = json.loads(model.to_json())
    content["runtime"] = {
        "trainer_flop_per_s_by_threads": {f.note: f.values["train_flop_per_s"] for f in trainers},
        "trainer_step_base_s_by_threads": {
            f.note: f.values["train_step_base_s"] for f in trainers
        },
        "refill_latency_s": refill.values["refill_latency_s"],
        "core_sharing_alpha": engine.values["core_sharing_alpha"],
        "core_sharing_alpha_spin": engine.values["core_sharing_alpha_spin"],
        "core_sharing_alpha_batch": engine.values["core_sharing_alpha_batch"],
        "engine_spin_s": engine.values["engine_spin_s"],
        "cross_core_gamma": engine.values["cross_core_gamma"],
        **({"cross_core_gamma_within_runs": engine.values["cross_core_gamma_within_runs"]}
           if engine.values["cross_core_gamma_within_runs"] is not None else {}),
        "engine_load_per_rollout_by_mode": engine.values["mode_load_per_rollout"],
        "runs": [str(r.path) for r in runs],
        "placements": placements(runs),
        "cpu_model": m["cpu_model"],
    }
    content["fit"] = {f.name: asdict(f) for f in [engine, *trainers, *transfers, refill]}
    return content


def placements(runs: list) -> list[dict]:
    """The (mode, rollouts) placements the runs had, each once, sorted: ``laminar simulate
    --cost`` warns for a job in none of them (its engines' sharing was never measured)."""
    seen = {(str(r.config.runtime.mode), int(r.config.runtime.rollouts)) for r in runs}
    return [{"mode": mode, "rollouts": n} for mode, n in sorted(seen)]


def cost_file_json(content: dict) -> str:
    """The cost file's text: standard JSON (a fit figure that is undefined, the R² of a
    constant, is written ``null``, not ``NaN``)."""
    return json.dumps(_finite_or_null(content), indent=2, allow_nan=False) + "\n"


def _finite_or_null(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(v) for v in value]
    return value
