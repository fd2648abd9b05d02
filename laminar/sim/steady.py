"""Steady state: the warm-up a run leaves out, and whether its figures still trend after it.

A run starts with empty pipelines (no trajectory is stale, the buffer fills), so its first
steps are not what the cluster does in the long run; the paper averages after ten warm-up
iterations (§8). ``sim.warmup_steps: auto`` (the default) leaves out the first quarter of the
trainer steps, rounded down (20 steps: 5, the presets' choice).

Trend test, on the trainer steps after the warm-up, per system: split them into an earlier and
a later half (the middle step of an odd count goes to neither) and compare the halves' means of

- training throughput, each step's tokens over its duration (end to end of the previous step):
  trending when the halves differ by more than ``THROUGHPUT_REL`` (10%) of the earlier half;
- consumed staleness, each step's mean: trending when the halves differ by more than
  ``STALENESS_ABS`` (0.5 versions) and by more than ``STALENESS_REL`` (10%) of the earlier half.

Fewer than ``MIN_STEPS`` (4) post-warm-up steps cannot tell. A run that trends, or cannot tell,
is too short to give steady-state figures; ``laminar simulate`` says so under its summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

WARMUP_FRACTION = 0.25
THROUGHPUT_REL = 0.10
STALENESS_ABS = 0.5
STALENESS_REL = 0.10
MIN_STEPS = 4


def warmup_steps(cfg) -> int:
    """The trainer steps a run leaves out of its rates (``sim.warmup_steps``, ``auto`` resolved)."""
    w = cfg.sim.warmup_steps
    if w == "auto":
        return int(cfg.workload.steps * WARMUP_FRACTION)
    return int(w)


@dataclass(frozen=True, slots=True)
class Trend:
    """One figure's earlier-half and later-half means over the post-warm-up steps."""

    figure: str
    earlier: float
    later: float
    trending: bool

    def describe(self) -> str:
        change = self.later - self.earlier
        if self.figure == "throughput":
            rel = change / self.earlier if self.earlier else float("inf")
            return f"training throughput {rel:+.0%} from the first to the second half"
        return f"staleness {self.earlier:.2f} -> {self.later:.2f} from the first to the second half"


def _halves(values: np.ndarray) -> tuple[float, float]:
    half = len(values) // 2
    return float(values[:half].mean()), float(values[len(values) - half :].mean())


def trends(steps: pd.DataFrame, warmup: int) -> list[Trend] | None:
    """The trend test (module docstring) on one system's steps table; None: too few steps."""
    if len(steps) == 0:
        return None
    steps = steps.sort_values("step")
    duration_s = steps["end_s"].diff().fillna(steps["end_s"]).to_numpy()
    win = (steps["step"] >= warmup).to_numpy()
    if win.sum() < MIN_STEPS:
        return None
    rate = steps["tokens"].to_numpy()[win] / np.maximum(duration_s[win], 1e-12)
    a, b = _halves(rate)
    out = [Trend("throughput", a, b, abs(b - a) > THROUGHPUT_REL * a)]
    a, b = _halves(steps["staleness_mean"].to_numpy()[win])
    out.append(Trend("staleness", a, b, abs(b - a) > max(STALENESS_ABS, STALENESS_REL * a)))
    return out


def steady_state(steps: pd.DataFrame, warmup: int) -> str:
    """``steady``, ``too few steps`` or ``trending: ...`` (what still moves) for the summary."""
    found = trends(steps, warmup)
    if found is None:
        return f"too few steps (< {MIN_STEPS} after the warm-up)"
    moving = [t.describe() for t in found if t.trending]
    return "trending: " + "; ".join(moving) if moving else "steady"
