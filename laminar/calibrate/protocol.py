"""How a calibration's runs measure up to docs/fidelity.md's protocol (steps, repeats, rollouts).

``docs/fidelity.md`` (*Calibrating on your cluster*) asks for runs of at least :data:`STEPS`
trainer steps, at least :data:`REPEATS` runs of every setting, and a run with a single rollout
beside the modes to predict. Its figures rest on that: calibrated on the issue's shortcut (10
steps, 2 repeats, no one-rollout run: the thirteenth campaign), held-out jobs missed by 2-31%
with their own or probed lengths, about as far as such runs scatter. ``laminar calibrate``
prints what its runs lack of it (:func:`protocol_gaps`), so a user reads a prediction from a
short calibration with the accuracy it has.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from laminar.calibrate.answers import task_of
from laminar.config import load_config
from laminar.runfiles.profile import read_profile_table

STEPS = 24
"""Trainer steps a calibration run should have (the first, a cold start, is left out)."""
REPEATS = 3
"""Runs of each setting: single runs of one setting scatter 4.7-14.5% (tenth campaign)."""
SHORTCUT = ("held-out jobs calibrated on 10-step runs, 2 repeats and no one-rollout run missed "
            "by 2-31% in the thirteenth campaign (docs/fidelity.md)")  # fmt: skip


def setting_of(config) -> tuple:
    """What makes two runs repeats of one setting: the runtime's mode and rollout count, and
    the task the policy trained on (``answers.task_of``)."""
    task = task_of(config)
    return (str(config.runtime.mode), int(config.runtime.rollouts), task["median_len"],
            task["tail_ratio"], task["max_response_len"])  # fmt: skip


def protocol_gaps(runs: Sequence[tuple[str, object, int]]) -> list[str]:
    """One line for each way ``runs`` fall short of the protocol; empty when they meet it.
    ``runs``: (path, config, trainer steps recorded) of each calibration run."""
    gaps = []
    short = [(steps, path) for path, _, steps in runs if steps < STEPS]
    if short:
        steps, path = min(short)
        gaps.append(f"{len(short)} of {len(runs)} run(s) have fewer than {STEPS} trainer "
                    f"steps (fewest: {steps}, {path})")  # fmt: skip
    counts = Counter(setting_of(cfg) for _, cfg, _ in runs)
    few = sorted((n, s) for s, n in counts.items() if n < REPEATS)
    if few:
        said = ", ".join(f"{s[0]} x{s[1]} ({n} run{'s' if n > 1 else ''})" for n, s in few)
        gaps.append(f"{len(few)} of {len(counts)} setting(s) have fewer than {REPEATS} "
                    f"repeats: {said}")  # fmt: skip
    if not any(int(cfg.runtime.rollouts) == 1 for _, cfg, _ in runs):
        gaps.append("no run with one rollout (--set runtime.rollouts=1): what an engine beside "
                    "an idle core costs is fitted between the other settings only")  # fmt: skip
    return gaps


def read_protocol_inputs(run_dirs: Sequence[str | Path]) -> list[tuple[str, object, int]]:
    """(path, config, trainer steps recorded) of each run directory (already read once by the
    calibration, so its files are known to be sound)."""
    out = []
    for d in run_dirs:
        cfg = load_config(Path(d) / "config.yaml")
        steps = len(read_profile_table(d, "trainer_steps"))
        out.append((str(d), cfg, steps))
    return out
