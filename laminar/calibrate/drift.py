"""How the calibration runs' answers moved as they trained: what a probe's first steps show.

``laminar calibrate --lengths-from PROBE`` takes the task lengths from a short run of the job to
predict (``laminar.calibrate.answers``): a snapshot of its policy over the probe's first steps.
A probe's answers run longer than the job's over its window: in the fifteenth campaign the mean
answer over 24 steps was 0.77-0.84 of the first four steps' in the calibration runs and
0.45-0.76 in the held-out jobs, and the long jobs' probed step times came out +49% and +55%
(``docs/fidelity.md``, *Fifteenth campaign*). About half of that gap is which prompts the first
steps ask (an answer's length depends on its prompt), half the policy shortening its answers
over its first 2-3 steps (*Eighteenth campaign*; ``benchmarks/fidelity.py``, ``probe_gap``).
How lengths move is not modelled; this measures the gap on the calibration runs, over the
probe's window, so that ``laminar calibrate`` can say how far a probe's lengths may overstate
a longer job's. It changes no figure of the cost file.
"""

from __future__ import annotations

import math

import numpy as np

from laminar.calibrate.fit import Fit
from laminar.calibrate.rundir import RunData

FIRST_STEP = 1  # the figures' window opens after the cold first step, as the simulator's


def later_over_first(run: RunData, first_steps: int) -> float | None:
    """The run's mean response over its window (steps from ``FIRST_STEP``) over its mean
    response over its first ``first_steps`` steps; None without a trace, or for a run whose
    trace does not go past them."""
    lengths = run.lengths
    if lengths is None or len(lengths) == 0 or first_steps < 1:
        return None
    step = lengths["step"].to_numpy(float)
    response = lengths["response"].to_numpy(float)
    first, later = response[step < first_steps], response[step >= FIRST_STEP]
    if step.max() < first_steps or not len(first) or not len(later) or first.mean() <= 0:
        return None
    return float(later.mean() / first.mean())


def measure(runs: list[RunData], probes: list[RunData]) -> Fit | None:
    """A row of the calibration's table: the calibration runs' answers over their window
    against their first steps, as many as the longest probe ran (``workload.steps``); None
    without probes or without a calibration run longer than them."""
    if not probes:
        return None
    k = max(int(p.config.workload.steps) for p in probes)
    ratios = [r for r in (later_over_first(run, k) for run in runs) if r is not None]
    if not ratios:
        return None
    mean = float(math.exp(np.mean(np.log(ratios))))
    last = max(int(run.lengths["step"].max()) for run in runs
               if run.lengths is not None and len(run.lengths))  # fmt: skip
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else f"{ratios[0]:.2f}"
    note = (f"the calibration runs' answers over steps {FIRST_STEP}-{last} were {mean:.2f}x "
            f"(runs {spread}) as long as over their first {k}, the --lengths-from run's window: "
            + ("answers that run shorter after a probe's steps (its prompts, and its policy's "
               "first steps) make the probe's lengths, and its step time, an upper figure"
               if mean < 1 else "answers that run longer after them make the probe's lengths a "
               "lower figure"))
    values = {"later_over_first": mean, "first_steps": float(k),
              "min": float(min(ratios)), "max": float(max(ratios))}  # fmt: skip
    nan = float("nan")
    return Fit("answer lengths", values, len(ratios), nan, nan, nan, note)
