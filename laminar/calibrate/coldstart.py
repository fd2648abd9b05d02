"""A job's cold start, fitted to runs: what its first step costs beyond a warm one.

The figures leave the first trainer step out, but what happens in it decides the state the
window starts in: while a fresh trainer pays torch's warm-up on its first update, the rollouts
keep generating up to the prompt pool's budget (``prefetch_steps`` ahead), so a job that may
run further ahead enters the window with more finished groups buffered. Two terms:

- **first trainer step**: step 0's wall seconds beyond what the trainer fit charges its padded
  tokens (the first backward's allocations and kernel set-up), median over runs, per trainer
  thread count (``runtime.trainer_first_step_extra_s_by_threads``);
- **first prompts**: from the training loop's start (``setup_s``) to the first trajectory's
  start (the rollouts' first Ray calls into the pools, the streamer's start), median over runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from laminar.calibrate.fit import Fit, padded_tokens, quality, train_flops
from laminar.calibrate.rundir import RunData


def _median_fit(name: str, key: str, values: list[float], what: str) -> Fit:
    if not values:
        return Fit(name, {key: 0.0}, 0, float("nan"), 0.0, 0.0, f"no {what} recorded")
    arr = np.asarray(values, dtype=float)
    med = float(np.median(arr))
    r2, rel_med, p90 = quality(arr, np.full(len(arr), med))
    return Fit(name, {key: med}, len(arr), r2, rel_med, p90, f"median {med:.2f} s {what}")


def fit_first_step(runs: list[RunData], trainers: list[Fit],
                   speed: Sequence[float] | None = None) -> dict[int, Fit]:  # fmt: skip
    """The first trainer step's extra wall seconds, one fit per trainer thread count as the
    trainer's rate is (module docstring); ``speed`` as ``fit_trainer``'s."""
    by_threads = {int(f.note): f.values for f in trainers}
    extra: dict[int, list[float]] = {}
    for i, run in enumerate(runs):
        k = 1.0 if speed is None else float(speed[i])
        threads = int(run.machine["trainer_threads"])
        fit = by_threads.get(threads)
        first = run.trainer[run.trainer["step"] == 0]
        if fit is None or first.empty:
            continue
        f1, f2 = train_flops(run)
        tokens, tokens_sq = padded_tokens(run, first)
        flop = float(f1 * tokens[0] + f2 * tokens_sq[0])
        warm_s = fit["train_step_base_s"] + flop / fit["train_flop_per_s"]
        extra.setdefault(threads, []).append(max(0.0, float(first["train_s"].iloc[0]) / k - warm_s))
    return {
        threads: _median_fit(f"first step ({threads} thread{'s' * (threads > 1)})",
                             "trainer_first_step_extra_s", values, "beyond a warm step")
        for threads, values in sorted(extra.items())
    }  # fmt: skip


def fit_first_prompts(runs: list[RunData]) -> Fit:
    """Seconds from the loop's start to the first trajectory's start (module docstring)."""
    delays = []
    for run in runs:
        setup_s = run.summary.get("setup_s")
        if setup_s is None or run.starts is None:  # an older run: no figure
            continue
        starts = run.starts.dropna()
        if len(starts):
            delays.append(max(0.0, float(starts.min()) - float(setup_s)))
    return _median_fit("first prompts", "first_prompts_s", delays, "from loop start")
