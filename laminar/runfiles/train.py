"""The files of a ``laminar train`` run directory, one reader each, for every command that reads
them: ``laminar plot``, ``laminar calibrate`` and ``laminar train --resume``.

The runtime writes them (``laminar/runtime/run/outputs.py``, ``resume.py``); each reader checks
the columns or keys its readers use (:mod:`laminar.runfiles.tables`), so a truncated, empty,
binary or foreign file is one error naming the file, the row and the column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from laminar.runfiles.tables import (
    COUNT,
    SECONDS,
    Number,
    RunDirError,
    Text,
    field,
    file_error,
    read_csv,
    read_json_object,
    read_parquet,
    text_field,
)

MODES = ("laminar", "sync")

STEPS = {
    "step": COUNT, "train_s": SECONDS, "publish_s": SECONDS, "wait_s": SECONDS,
    "gen_s": SECONDS, "tokens": COUNT, "reward_mean": Number(nullable=True),
}  # fmt: skip
"""``steps.csv``: one row per trainer step (``Trainer.step``'s row), steps in order."""
STEPS_NEED = ("step", "train_s", "publish_s")

TRAJECTORIES = {
    "step": COUNT, "prompt_len": COUNT, "response_len": COUNT, "replica_id": Text(),
    "gen_start_s": Number(nullable=True), "gen_end_s": Number(nullable=True),
    "weight_version": Number(low=-1, whole=True),
    "consumed_version": Number(low=-1, whole=True),
    "consumed_s": Number(nullable=True), "staleness": Number(low=-1, whole=True),
}  # fmt: skip
"""``trajectories.parquet``: the trace schema with the measured timing and version columns."""

EVENTS = {"kind": Text(), "at_s": Number(), "src": Text()}
"""``events.csv``: repack moves and recoveries (a header alone when there were none)."""

KV = {"at_s": Number(), "replica_id": Text(), "kv_usage": Number(low=0.0),
      "kv_tokens": COUNT, "trajectories": COUNT, "gen_tokens": COUNT}  # fmt: skip
"""``kv.csv``: each replica's KV-cache use at each of the manager's checks (the counts are
checked where a file has them; older runs have the first three columns only)."""
KV_NEED = ("at_s", "replica_id", "kv_usage")


def read_steps(run_dir: str | Path, need: tuple[str, ...] = STEPS_NEED) -> pd.DataFrame | None:
    """``steps.csv`` of ``run_dir`` (None when there is none: a run stopped before its first
    step), its steps strictly increasing."""
    path = Path(run_dir) / "steps.csv"
    if not path.exists():
        return None
    frame = read_csv(path, STEPS, kind="steps table (steps.csv)", need=need)
    steps = frame["step"].to_numpy()
    back = np.flatnonzero(np.diff(steps) <= 0)
    if len(back):
        row = int(back[0]) + 2
        raise file_error(path, f"step {steps[row - 1]:g} after step {steps[row - 2]:g}; steps "
                         "must increase", row=row, column="step")  # fmt: skip
    return frame


def read_trajectories(run_dir: str | Path, need: tuple[str, ...]) -> pd.DataFrame | None:
    """``trajectories.parquet`` of ``run_dir`` with the columns ``need`` at least (None
    without one: a run that finished no trajectory)."""
    path = Path(run_dir) / "trajectories.parquet"
    if not path.exists():
        return None
    return read_parquet(path, TRAJECTORIES, kind="trajectory trace", need=need)


def read_events(run_dir: str | Path) -> pd.DataFrame:
    return read_csv(Path(run_dir) / "events.csv", EVENTS, kind="events table (events.csv)")


def read_kv(run_dir: str | Path) -> pd.DataFrame:
    return read_csv(Path(run_dir) / "kv.csv", KV, kind="KV table (kv.csv)", need=KV_NEED)


def read_summary(run_dir: str | Path) -> dict:
    """``summary.json``: the run in one object; the fields readers use are checked (``mode``,
    ``setup_s``, ``train_tokens_per_s``, ``faults``)."""
    path = Path(run_dir) / "summary.json"
    data = read_json_object(path, kind="run summary (summary.json)", nan=True)
    text_field(data, "mode", path, choices=MODES)
    field(data, "setup_s", SECONDS, path)
    field(data, "train_tokens_per_s", Number(low=0.0, nullable=True), path)
    faults = data.get("faults")
    if faults is not None:
        if not isinstance(faults, list):
            raise file_error(path, f"faults: expected a list, got {type(faults).__name__}")
        for i, fault in enumerate(faults):
            check_fault(fault, path, f"faults[{i}].")
    return data


def check_fault(fault: object, path: Path, where: str) -> None:
    """One record of ``summary.json``'s ``faults`` (and a checkpoint's ``meta.json``)."""
    if not isinstance(fault, dict):
        raise file_error(path, f"{where[:-1]}: expected an object, got {type(fault).__name__}")
    if text_field(fault, "kind", path, where=where) is None:
        raise file_error(path, f"{where}kind: missing")
    text_field(fault, "target", path, where=where)
    field(fault, "at_s", Number(nullable=True), path, where=where)
    for key in ("detection_s", "recovery_s", "replaced_s"):
        field(fault, key, Number(low=0.0, nullable=True), path, where=where)
    names = fault.get("replacements")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        raise file_error(path, f"{where}replacements: expected a list of replica names")


def read_config_mapping(run_dir: str | Path) -> dict:
    """``config.yaml`` as a plain mapping (``{}`` when absent), for what a figure labels a
    run with; the config's own loader (``laminar.config``) reads it for everything else."""
    import yaml

    from laminar.config.loader import load_yaml
    from laminar.errors import ConfigError
    from laminar.inputfile import MiB, read_text

    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        return {}
    try:  # no alias bombs from a damaged file
        data = load_yaml(read_text(path, kind="config file", max_bytes=16 * MiB), str(path))
    except ConfigError as e:
        raise RunDirError(str(e)) from None
    except yaml.YAMLError as e:
        raise file_error(path, f"not valid YAML ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(data, dict):
        raise file_error(path, f"expected a YAML mapping, found {type(data).__name__}")
    runtime = data.get("runtime")
    if runtime is not None and not isinstance(runtime, dict):
        raise file_error(path, "runtime: expected a mapping")
    text_field(runtime or {}, "mode", path, where="runtime.", choices=MODES)
    return data
