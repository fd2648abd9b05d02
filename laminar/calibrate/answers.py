"""How the calibration runs' policy answered the repeat task: each response over the exact answer.

The simulator's task lengths used to be a policy that answers exactly (n letters and the end of
sequence: n + 1 tokens). The runtime's policy does not: in a `tiny-cpu` run it hit the exact
length in about half of its answers, ran past short answers (mean 1.3-1.8x for answers under 16
tokens), stopped far short of long ones (0.1-0.4x for answers of 32 tokens and more), and ran to
``max_response_len`` now and then (docs/fidelity.md, *Issue 31*). Replaying the calibration
runs' own lengths predicted them within 10% where the exact answers moved the prediction +9% to
+34% (tenth campaign), so the lengths, not the cost terms, were what a prediction from the task
missed.

``policy_lengths(runs)`` measures it from every calibration run with a repeat task and a trace:
each trained trajectory's exact answer (``laminar.policy.repeatanswers``, the prompt the runtime
handed out) against its response, pooled, by exact length in buckets of at least
``MIN_SAMPLES`` trajectories (powers of two, merged upwards): the share that ran to
``max_response_len`` (``cap_frac``) and 20 quantiles of response / exact among the rest
(``ratio_q``). The cost file's ``policy_lengths`` block (checked by ``laminar.costlengths``)
carries it; the simulator's task lengths draw each sample's response from its bucket
(``laminar.sim.local_workload``): a runaway to the predicted job's own ``max_response_len``, else
the exact length times one of its quantiles drawn at random. Beyond the longest answer the runs
saw, the last bucket stands in: that is an extrapolation, and ``laminar simulate --cost`` warns
when the responses leave the calibrated range (``laminar.calibrate.ranges``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from laminar.calibrate.rundir import RunData
from laminar.policy.repeatanswers import answer_len

MIN_SAMPLES = 16  # trajectories per bucket, at least
QUANTILES = tuple(round(0.025 + 0.05 * i, 3) for i in range(20))  # 20 quantiles: midpoints


def answered(run: RunData) -> pd.DataFrame | None:
    """Each trained trajectory's ``exact`` length (n + 1), ``response`` and ``at_cap``; None
    for a run without a repeat task or without a trace with prompt ids."""
    task = run.config.runtime.task
    lengths = run.lengths
    if getattr(task, "type", "repeat") != "repeat" or lengths is None:
        return None
    if "prompt_id" not in lengths or "response" not in lengths:
        return None
    cap = int(run.config.workload.max_response_len)
    n = [answer_len(run.config.seed, int(p), median_len=task.median_len,
                    tail_ratio=task.tail_ratio, max_answer_len=cap - 1)
         for p in lengths["prompt_id"]]  # fmt: skip
    response = lengths["response"].to_numpy(int)
    return pd.DataFrame({"exact": np.asarray(n, dtype=int) + 1, "response": response,
                         "at_cap": response >= cap})  # fmt: skip


def task_of(config) -> dict:
    """The repeat task a run's policy was warmed up on and trained for: what its answers
    depend on besides the model (``laminar simulate --cost`` warns for a job with another)."""
    task = config.runtime.task
    return {"median_len": float(task.median_len), "tail_ratio": float(task.tail_ratio),
            "max_response_len": int(config.workload.max_response_len)}  # fmt: skip


def policy_lengths(runs: list[RunData]) -> dict | None:
    """The cost file's ``policy_lengths`` block (module docstring); None when no run has a
    repeat task with a trace. ``tasks``: the tasks of the runs it was measured on, each once."""
    measured = [(run, f) for run, f in zip(runs, map(answered, runs), strict=True)
                if f is not None and len(f)]  # fmt: skip
    if not measured:
        return None
    frames = [f for _, f in measured]
    tasks = {tuple(sorted(task_of(run.config).items())) for run, _ in measured}
    df = pd.concat(frames, ignore_index=True)
    buckets = []
    for lo, hi in _edges(df["exact"].to_numpy(int)):
        part = df[(df["exact"] >= lo) & (df["exact"] < hi)]
        free = part[~part["at_cap"]]
        ratio = (free["response"] / free["exact"]).to_numpy(float)
        q = np.quantile(ratio, QUANTILES) if len(ratio) else np.ones(len(QUANTILES))
        buckets.append({"answer_min": int(lo), "answer_max": int(hi), "samples": len(part),
                        "cap_frac": float(part["at_cap"].mean()),
                        "ratio_q": [float(x) for x in q]})  # fmt: skip
    return {"runs": len(frames), "tasks": [dict(t) for t in sorted(tasks)], "buckets": buckets}


def _edges(exact: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) exact-length buckets: powers of two, each merged with the next until it holds
    ``MIN_SAMPLES``; a short remainder joins the last bucket."""
    top = int(exact.max()) + 1
    bounds = [1]
    while bounds[-1] < top:
        bounds.append(min(bounds[-1] * 2, top))
    out: list[list[int]] = []
    start = bounds[0]
    for hi in bounds[1:]:
        if int(((exact >= start) & (exact < hi)).sum()) >= MIN_SAMPLES:
            out.append([start, hi])
            start = hi
    if start < top:
        if out:
            out[-1][1] = top
        else:
            out.append([start, top])
    return [(lo, hi) for lo, hi in out]
