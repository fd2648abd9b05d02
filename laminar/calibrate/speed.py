"""A run's machine speed from its probe, and a cost file moved to another measured speed.

``profile/speed_probe.csv`` (``laminar/runtime/profiling/speedprobe.py``) times a fixed single-core
workload beside the run. A run's speed is the geometric mean of the medians of its two probe
figures (``matmul_s``, ``python_s``) over the run's steps after its first ``skip_steps``, in
seconds: larger is slower. ``laminar calibrate`` records the geometric mean of its runs' speeds
as the cost file's ``runtime.speed_reference``; :func:`at_speed` scales every time coefficient
of a cost file by ``speed / reference``, to predict a run made while the machine ran at
``speed``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from laminar.calibrate.rundir import RunData, RunDirError, read_speed_probe, step_timeline
from laminar.runfiles.train import read_summary

PROBE_FIGURES = ("matmul_s", "python_s")
# How each time figure of a cost file moves with the machine's speed: seconds with it, rates
# against it. Sizes, counts, dimensionless shares and settings (``engine_spin_s``) stay.
SECONDS = ("decode_base_s", "decode_per_seq_s", "decode_per_kv_token_s", "decode_per_expert_s",
           "decode_min_step_s", "prefill_base_s", "prefill_per_token_s", "prefill_per_token_sq_s",
           "rdma_startup_s")
RATES = ("train_flop_per_s_per_gpu", "pcie_bytes_per_s", "nvlink_bytes_per_s",
         "rdma_bytes_per_s")  # fmt: skip
RUNTIME_SECONDS = ("refill_latency_s", "first_prompts_s")
RUNTIME_SECONDS_BY = ("trainer_step_base_s_by_threads", "trainer_first_step_extra_s_by_threads")
RUNTIME_RATES_BY = ("trainer_flop_per_s_by_threads",)


def run_speed(run: RunData, skip_steps: int = 1) -> dict | None:
    """``{matmul_s, python_s, speed_s, samples}`` of one run (module docstring); None when
    the run has no probe rows (a run recorded without ``runtime.speed_probe_s``)."""
    return window_speed(run.speed, _window_start(run.path, run.summary, skip_steps))


def dir_speed(root: str | Path, skip_steps: int = 1) -> dict | None:
    """:func:`run_speed` of the run directory ``root``, reading only what it needs."""
    root = Path(root)
    summary = read_summary(root)
    probe = read_speed_probe(root / "profile" / "speed_probe.csv")
    return window_speed(probe, _window_start(root, summary, skip_steps))


def window_speed(probe: pd.DataFrame | None, start_s: float) -> dict | None:
    """The probe's figures over its samples from ``start_s`` on (every sample when none is)."""
    if probe is None or probe.empty:
        return None
    win = probe[probe["at_s"] >= start_s]
    if win.empty:
        win = probe  # a run shorter than its warm-up: every sample
    out = {k: float(win[k].median()) for k in PROBE_FIGURES}
    out["speed_s"] = math.sqrt(out["matmul_s"] * out["python_s"])
    out["samples"] = len(win)
    return out


def _window_start(root: Path, summary: dict, skip_steps: int) -> float:
    """Where the window opens on the job clock: the loop's start, after ``skip_steps`` steps."""
    setup_s = float(summary.get("setup_s", 0.0))
    steps = step_timeline(root, setup_s) if skip_steps > 0 else None
    if steps is None:
        return setup_s
    return setup_s + float(steps["took_s"][steps["step"] < skip_steps].sum())


def reference(runs: list[RunData]) -> dict | None:
    """The geometric mean of the runs' speeds; None unless every run has a probe."""
    speeds = [run_speed(r) for r in runs]
    if not speeds or any(s is None for s in speeds):
        return None
    out = {k: _geomean([s[k] for s in speeds]) for k in (*PROBE_FIGURES, "speed_s")}
    out["runs"] = len(speeds)
    return out


def factors(runs: list[RunData]) -> tuple[list[float] | None, dict | None]:
    """(each run's speed over the runs' reference, the reference): what calibration divides
    each run's engine and trainer seconds by, so that its coefficients hold at the reference
    speed and runs made while the machine was slower or faster agree. (None, None) unless
    every run has a probe."""
    ref = reference(runs)
    if ref is None:
        return None, None
    return [run_speed(r)["speed_s"] / ref["speed_s"] for r in runs], ref


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def at_speed(content: dict, speed: dict, figure: str = "speed_s") -> dict:
    """A copy of the cost file ``content`` for a machine measured at ``speed`` (a
    :func:`run_speed` result), by the probe figure ``figure``."""
    ref = content.get("runtime", {}).get("speed_reference")
    if not ref:
        raise RunDirError("the cost file has no runtime.speed_reference: its runs were "
                          "recorded without the speed probe (runtime.speed_probe_s)")  # fmt: skip
    k = speed[figure] / ref[figure]
    data = json.loads(json.dumps(content))
    coeffs, rt = data["coefficients"], data["runtime"]
    for name in SECONDS:
        if name in coeffs:
            coeffs[name]["value"] *= k
    for name in RATES:
        if name in coeffs:
            coeffs[name]["value"] /= k
    for name in RUNTIME_SECONDS:
        if name in rt:
            rt[name] *= k
    for name in RUNTIME_SECONDS_BY:
        rt[name] = {t: v * k for t, v in rt.get(name, {}).items()}
    for name in RUNTIME_RATES_BY:
        rt[name] = {t: v / k for t, v in rt.get(name, {}).items()}
    for f in rt.get("trainer_cpu", {}).values():
        f["flop_per_s"] /= k
        f["step_base_s"] *= k
    rt["speed_reference"] = {**ref, **{p: speed[p] for p in (*PROBE_FIGURES, "speed_s")}}
    rt["speed_scaled_by"] = k
    return data
