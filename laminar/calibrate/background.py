"""What other processes took of an engine's cores, by what the other cores did: measured.

An engine pinned alone to its cores loses part of them to the job's unpinned processes (the
driver, the pools, the rollout manager, Ray's processes, the trainer's coordinator:
``docs/fidelity.md``, *Issue 31*), which the scheduler puts where there is room. The engine
term's ``cross_core_gamma`` (``laminar.calibrate.fit``) is fitted from the steps' speed, where
it can only be told apart as a difference between settings; this reads the cores' CPU
accounting instead (``profile/core_cpu.csv``, ``laminar/runtime/profiling/corecpu.py``).

For each probe tick (``corecpu.TICK_S``) and each engine alone on its cores whose steps (on its
own clock, which leaves out about 30% of a busy engine's time: scheduling, outputs) cover at
least ``ACTIVE_SHARE`` of the tick, ``background`` is the share of its cores that went to
anything but the job's pinned processes (busy minus pinned, per core). Each such tick is
classed by what the cores outside the engine's set did for most of it:

- ``engine``: another engine held them, stepping or spinning (vLLM's worker polls for its next
  step for ``engine_spin_s`` after its last one, on its cores: they are not free);
- ``trainer``: the trainer updated there and no engine held them;
- ``free``: neither.

Beside it, on the same ticks, ``front``: the share of the engine's cores its own rollout's front
end took (pinned there, not vLLM's: laminar's control loop asks the pools from there), and
``vllm``: the share vLLM's own processes got.

``laminar calibrate`` prints and records the mean background per class (:func:`measure`), and
the cross-core factor it implies (``Measured.gamma``: the cost file's
``cross_core_gamma_measured``), which ``laminar simulate --cost`` holds the fitted one against.
The fit keeps its own factor: in the fourteenth campaign the measured one (0.10, against 0.22
fitted) accounted for about 40% of the engine-speed gap between settings that the fitted one
carries (``docs/fidelity.md``, *Issue 31*).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from laminar.calibrate.fit import Fit, _covered, replica_index, share_covered, update_intervals
from laminar.calibrate.rundir import RunData

ACTIVE_SHARE = 0.5  # an engine's own-clock steps covered at least this share of a tick
CLASSES = ("free", "trainer", "engine")  # what the other cores did (module docstring)
MIN_TICKS = 5  # fewer ticks in a class: its figure is not given


@dataclass(frozen=True)
class Measured:
    """Mean background share of an engine's cores (``share``) and ticks (``ticks``) per class
    of ``CLASSES``, over ``runs`` runs; the front end's and vLLM's mean shares over all those
    ticks (NaN for runs recorded without the ``engine`` rows)."""

    share: dict[str, float]
    ticks: dict[str, int]
    runs: int
    front: float = float("nan")
    vllm: float = float("nan")

    def gamma(self) -> float | None:
        """``cross_core_gamma`` as the CPU accounting gives it: how much slower an engine
        runs while another engine holds the other cores than while they are free, (1 -
        free) / (1 - engine) - 1, at least 0; None without both classes."""
        if "free" not in self.share or "engine" not in self.share:
            return None
        return max(0.0, (1.0 - self.share["free"]) / max(1.0 - self.share["engine"], 1e-9) - 1)

    def fit(self) -> Fit:
        """The measurement as a row of the calibration's table (``laminar calibrate``)."""
        shown = ", ".join(f"{c} {self.share[c]:.3f} ({self.ticks[c]} ticks)"
                          for c in CLASSES if c in self.share)  # fmt: skip
        gamma = self.gamma()
        own = ("" if np.isnan(self.front) else
               f"; its rollout's front end {self.front:.3f}, vLLM {self.vllm:.3f}")  # fmt: skip
        note = (f"share of an engine's cores other processes took, by what the other cores "
                f"did: {shown or 'too few ticks'}{own}"
                + (f"; an engine's step takes {1 + gamma:.2f}x as long beside another engine as "
                   f"beside free cores" if gamma is not None else ""))  # fmt: skip
        values = {f"background_{c}": v for c, v in self.share.items()}
        if not np.isnan(self.front):
            values.update(front_end=self.front, vllm=self.vllm)
        samples = sum(self.ticks.values())
        return Fit("cores' CPU", values, samples, float("nan"), float("nan"), float("nan"), note)


def tick_frame(run: RunData) -> pd.DataFrame | None:
    """Per probe tick and set of cores that engines are pinned to: ``replica_id`` (the
    engines there, joined by "+"), ``engines`` (how many), ``engine`` (share of the tick one
    of them stepped), ``held`` (share another engine held the other cores), ``trainer``
    (share the trainer updated on cores not theirs), ``background``, ``front`` and ``vllm``
    (module docstring, the front ends and vLLM processes of all of them; NaN without
    ``engine`` rows); None when the run recorded no core rows."""
    cores = run.cores
    if cores is None or cores.empty:
        return None
    per_core = cores[cores["what"].isin(["busy", "pinned", "engine"])]
    wide = per_core.pivot_table(index="at_s", columns=["what", "core"], values="cpu_s",
                                aggfunc="sum")  # fmt: skip
    ticks = wide.index.to_numpy(float)
    if len(ticks) < 2 or "busy" not in wide or "pinned" not in wide:
        return None
    start, end = ticks[:-1], ticks[1:]  # a tick's row covers the time since the previous one
    wide = wide.iloc[1:]
    interval = np.maximum(end - start, 1e-9)
    spin_s = run.config.runtime.engine_spin_effective_s
    eng = run.engine
    ids = eng["replica_id"].astype(str).to_numpy()
    steps = np.column_stack([(eng["at_s"] - eng["step_s"]).to_numpy(float),
                             eng["at_s"].to_numpy(float)])  # fmt: skip
    train = update_intervals(run)
    cpus = [frozenset(c) for c in run.machine["rollout_cpus"]]
    trainer = frozenset(run.machine.get("trainer_cpus") or [])
    index = {rid: replica_index(rid) for rid in np.unique(ids)}
    setup = float(run.summary.get("setup_s", 0.0))
    frames = []
    for here in dict.fromkeys(c for c in cpus if c):  # each core set once, in order
        mates = [r for r, j in index.items() if 0 <= j < len(cpus) and cpus[j] == here]
        if not mates:
            continue
        mine = sorted(here)
        if not all(("busy", c) in wide and ("pinned", c) in wide for c in mine):
            continue
        free = sum(wide[("busy", c)].to_numpy(float) - wide[("pinned", c)].to_numpy(float)
                   for c in mine)  # fmt: skip
        width = len(mine) * interval
        if all(("engine", c) in wide for c in mine):
            vllm = sum(wide[("engine", c)].to_numpy(float) for c in mine) / width
            front = sum(wide[("pinned", c)].to_numpy(float) for c in mine) / width - vllm
        else:
            vllm = front = np.full(len(interval), np.nan)
        others = [steps[ids == r] for r, j in index.items()
                  if 0 <= j < len(cpus) and cpus[j] and not cpus[j] & here]
        held = np.vstack(others) if others else np.zeros((0, 2))
        held = held + np.array([0.0, spin_s])  # a finished engine spins on its cores
        frames.append(pd.DataFrame({
            "replica_id": "+".join(mates), "engines": len(mates),
            "engine": share_covered(_covered(steps[np.isin(ids, mates)]), start, end),
            "held": share_covered(_covered(held), start, end),
            "trainer": share_covered(_covered(train if trainer - here else np.zeros((0, 2))),
                                     start, end),
            "background": np.clip(free / width, 0.0, 1.0),
            "front": front, "vllm": vllm,
        })[start >= setup])  # fmt: skip
    return pd.concat(frames, ignore_index=True) if frames else None


def classify(df: pd.DataFrame) -> pd.Series:
    """Each tick's class (``CLASSES``): what the other cores did for most of it."""
    out = pd.Series("free", index=df.index)
    out[df["trainer"] >= 0.5] = "trainer"
    out[df["held"] >= 0.5] = "engine"
    return out


def measure(runs: list[RunData], mates: bool = False) -> Measured | None:
    """Mean background per class over the runs' ticks of an engine stepping alone on its
    cores (with ``mates``: of engines stepping on any pinned cores, sharing them or not);
    None where no run recorded core rows or no such tick exists."""
    frames = [df for df in map(tick_frame, runs) if df is not None]
    used = len(frames)
    frames = [df[(df["engine"] >= ACTIVE_SHARE) & (mates | (df["engines"] == 1))]
              for df in frames]  # fmt: skip
    frames = [df for df in frames if len(df)]
    if not frames:
        return None
    df = pd.concat(frames, ignore_index=True)
    df["class"] = classify(df)
    groups = df.groupby("class")["background"]
    counts = groups.size().to_dict()
    share = {c: float(v) for c, v in groups.mean().items() if counts[c] >= MIN_TICKS}
    ticks = {c: int(counts.get(c, 0)) for c in CLASSES}
    front, vllm = df["front"].mean(), df["vllm"].mean()  # NaN where not recorded
    return Measured({c: share[c] for c in CLASSES if c in share}, ticks, used,
                    float(front), float(vllm))  # fmt: skip
