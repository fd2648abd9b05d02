"""The batch, KV and length ranges a calibration saw, and where a prediction leaves them.

A fitted coefficient holds where its fit had data. ``laminar calibrate`` records in the cost
file's ``ranges`` block (checked by ``laminar.costfile``: ``RANGE_QUANTITIES``) what its runs
measured of each quantity the cost model's terms are fitted against:

- ``batch_seqs``: sequences decoded in one engine step (``profile/engine_steps.csv``'s
  ``decode_seqs``, the steps the engine fit uses);
- ``kv_tokens``: KV tokens the engine held in that step (its ``kv_tokens``);
- ``response_len``: response tokens of each trained trajectory (the run's trace);
- ``micro_batch_tokens``: padded tokens of each trainer micro-batch, the step's trajectories
  split as the trainer splits them (``laminar.policy.microbatch``): rows x the longest.

``laminar simulate --cost`` measures the same quantities in its own prediction (the simulated
replicas' batches and KV at every segment start, the consumed trajectories' lengths and the
micro-batches they make) and warns, one line per quantity, when the prediction goes below the
smallest or above the largest value the calibration saw (by more than ``EDGE``): there the fit
extrapolates (issue 31:
a job with 3x the calibration runs' p99 response length was over-predicted 36-113%).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from laminar.calibrate.rundir import RunData
from laminar.costfile import RANGE_QUANTITIES
from laminar.policy.microbatch import micro_batches

EDGE = 0.01
"""How far past a calibrated edge still counts as inside (relative): a micro-batch of 4,068
padded tokens where the calibration's largest had 4,059 (both under the 4,096 limit) is no
extrapolation worth a warning; a response of twice the longest seen is."""

WHAT = {
    "batch_seqs": "sequences decoded per engine step",
    "kv_tokens": "KV tokens an engine holds per step",
    "response_len": "response length",
    "micro_batch_tokens": "padded tokens per trainer micro-batch",
}


def stats(values: Iterable[float]) -> dict[str, float] | None:
    """{min, p50, p99, max} of ``values`` (None when there are none)."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return None
    return {"min": float(arr.min()), "p50": float(np.percentile(arr, 50)),
            "p99": float(np.percentile(arr, 99)), "max": float(arr.max())}  # fmt: skip


def micro_batch_tokens(lengths_by_step: Iterable[list[int]], max_tokens: int) -> list[int]:
    """Padded tokens of every micro-batch the trainer makes of each step's sequence lengths."""
    out = []
    for lengths in lengths_by_step:
        for batch in micro_batches(lengths, max_tokens):
            out.append(len(batch) * max(lengths[i] for i in batch))
    return out


def calibrated_ranges(runs: list[RunData]) -> dict[str, dict]:
    """The ``ranges`` block for the cost file fitted to ``runs`` (module docstring): each
    quantity's {min, p50, p99, max, unit} over every run; a quantity no run recorded (lengths
    without a trace) is left out."""
    batch, kv, response, micro = [], [], [], []
    for run in runs:
        eng = run.engine[(run.engine["decode_seqs"] > 0) & (run.engine["step_s"] > 0)]
        batch += eng["decode_seqs"].tolist()
        kv += eng["kv_tokens"].tolist()
        if run.lengths is not None:
            if "response" in run.lengths:
                response += run.lengths["response"].tolist()
            steps = [g.astype(int).tolist() for _, g in run.lengths.groupby("step")["length"]]
            micro += micro_batch_tokens(steps, run.config.runtime.grpo.micro_batch_tokens)
    return _block({"batch_seqs": batch, "kv_tokens": kv, "response_len": response,
                   "micro_batch_tokens": micro})  # fmt: skip


def predicted_ranges(replicas: pd.DataFrame, trajectories: pd.DataFrame,
                     micro_batch_limit: int) -> dict[str, dict]:  # fmt: skip
    """The same quantities in a simulation's tables (``SimResult.replicas``,
    ``.trajectories``): replicas at every segment start while they decode, the trajectories
    the trainer consumed (every one handed out when none was consumed)."""
    busy = replicas[replicas["running"] > 0] if "running" in replicas else replicas.iloc[:0]
    traj = trajectories
    if "consumed_version" in traj and (traj["consumed_version"] >= 0).any():
        traj = traj[traj["consumed_version"] >= 0]
    steps = []
    if len(traj):
        key = ["system", "step"] if "system" in traj else ["step"]
        lengths = traj["prompt_len"] + traj["response_len"]
        steps = [g.astype(int).tolist() for _, g in lengths.groupby([traj[k] for k in key])]
    return _block({
        "batch_seqs": busy.get("running", []),
        "kv_tokens": busy.get("kv_tokens", []),
        "response_len": traj["response_len"] if len(traj) else [],
        "micro_batch_tokens": micro_batch_tokens(steps, micro_batch_limit),
    })  # fmt: skip


def _block(values: dict[str, Iterable[float]]) -> dict[str, dict]:
    out = {}
    for name, vals in values.items():
        s = stats(vals)
        if s is not None:
            out[name] = {**s, "unit": RANGE_QUANTITIES[name]}
    return out


def outside(calibrated: dict[str, dict], predicted: dict[str, dict]) -> list[str]:
    """One line per quantity the prediction takes outside what the calibration saw: the
    calibrated range and what the prediction needs (empty when it stays inside)."""
    lines = []
    for name, cal in calibrated.items():
        pred = predicted.get(name)
        if pred is None or (pred["min"] >= cal["min"] * (1 - EDGE) and
                            pred["max"] <= cal["max"] * (1 + EDGE)):  # fmt: skip
            continue
        unit = RANGE_QUANTITIES[name]
        lines.append(
            f"warning: the prediction leaves the calibrated range of {name} ({WHAT[name]}): "
            f"calibrated {_span(cal)} {unit}, the prediction needs {_span(pred)} {unit}; the "
            "cost model extrapolates there (docs/fidelity.md, *Calibrating on your cluster*)"
        )
    return lines


def _span(s: dict) -> str:
    tail = f", p50 {s['p50']:,.0f}, p99 {s['p99']:,.0f}" if "p50" in s and "p99" in s else ""
    return f"{s['min']:,.0f}..{s['max']:,.0f}{tail}"
