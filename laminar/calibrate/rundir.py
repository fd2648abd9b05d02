"""Read the files of ``laminar train`` run directories that calibration needs (files only).

A run directory must hold ``config.yaml``, ``summary.json`` and ``profile/`` with
``engine_steps.csv``, ``trainer_steps.csv``, ``weight_loads.csv`` and ``machine.json``
(``laminar/runtime/profiling/profile.py`` writes them); ``speed_probe.csv`` is read when present.
Each file is read by its one reader in :mod:`laminar.runfiles` (shared with ``laminar plot`` and
``laminar train --resume``); errors name the file, the row and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from laminar.config import LaminarConfig, load_config
from laminar.runfiles.profile import (
    read_core_cpu,
    read_machine,
    read_profile_table,
    read_speed_probe,
)
from laminar.runfiles.tables import RunDirError
from laminar.runfiles.train import read_steps, read_summary, read_trajectories

__all__ = ["RunData", "RunDirError", "read_run", "read_speed_probe", "step_timeline"]


@dataclass
class RunData:
    """One run directory's calibration inputs."""

    path: Path
    config: LaminarConfig
    summary: dict
    machine: dict
    engine: pd.DataFrame
    trainer: pd.DataFrame
    loads: pd.DataFrame
    # step, length (prompt + response), response (and prompt_id) of each trajectory
    lengths: pd.DataFrame | None = None
    speed: pd.DataFrame | None = None  # the machine-speed probe's rows (None: not recorded)
    starts: pd.Series | None = None  # each trajectory's generation start (None: not recorded)
    cores: pd.DataFrame | None = None  # where the job's cores went (None: not recorded)


def read_run(path: str | Path) -> RunData:
    """Everything calibration reads from one run directory (module docstring), each file
    through its one reader (``laminar.runfiles``): bounded, columns and numbers checked."""
    root = Path(path)
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory (expected a `laminar train` run directory)")
    cfg_path = root / "config.yaml"
    if not cfg_path.exists():
        raise RunDirError(f"{cfg_path}: missing (is {root} a `laminar train` run directory?)")
    config = load_config(cfg_path)
    summary = read_summary(root)
    machine = read_machine(root)
    traj = read_trajectories(root, need=("step", "prompt_len", "response_len"))
    return RunData(
        path=root,
        config=config,
        summary=summary,
        machine=machine,
        engine=read_profile_table(root, "engine_steps"),
        trainer=read_profile_table(root, "trainer_steps"),
        loads=read_profile_table(root, "weight_loads"),
        lengths=_lengths(traj),
        speed=read_speed_probe(root / "profile" / "speed_probe.csv"),
        cores=read_core_cpu(root / "profile" / "core_cpu.csv"),
        starts=None if traj is None or "gen_start_s" not in traj else traj["gen_start_s"],
    )


def step_timeline(root: Path, setup_s: float) -> pd.DataFrame | None:
    """Each trainer step of the run in ``root`` on the job clock, from ``steps.csv`` (None
    without one): ``step``; ``before_s`` (sync runs generate first, ``gen_s``; laminar runs
    wait for data, ``wait_s``); ``train_s``; ``took_s``, the step's wall seconds (before, train,
    publish back to back); ``train_start_s`` and ``end_s``, counted from the loop's start at
    ``setup_s``."""
    st = read_steps(root)
    if st is None or st.empty:
        return None
    if "gen_s" not in st and "wait_s" not in st:
        raise RunDirError(f"{root / 'steps.csv'}: missing column 'wait_s' (or 'gen_s')")
    before = st["gen_s"] if "gen_s" in st else st["wait_s"]
    took = before + st["train_s"] + st["publish_s"]
    end = setup_s + took.cumsum()
    return pd.DataFrame({"step": st["step"], "before_s": before, "train_s": st["train_s"],
                         "took_s": took, "train_start_s": end - took + before,
                         "end_s": end})  # fmt: skip


def _lengths(traj: pd.DataFrame | None) -> pd.DataFrame | None:
    """Each consumed trajectory's step and length, from the run's trace (None without one: the
    trainer's fit then counts unpadded tokens)."""
    if traj is None:
        return None
    out = pd.DataFrame({"step": traj["step"], "length": traj["prompt_len"] + traj["response_len"],
                        "response": traj["response_len"]})  # fmt: skip
    if "prompt_id" in traj:  # the prompt each answered (``laminar.calibrate.answers``)
        out["prompt_id"] = traj["prompt_id"]
    return out
