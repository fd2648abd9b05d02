"""Read the files of ``laminar train`` run directories that calibration needs (files only).

A run directory must hold ``config.yaml``, ``summary.json`` and ``profile/`` with
``engine_steps.csv``, ``trainer_steps.csv``, ``weight_loads.csv`` and ``machine.json``
(``laminar/runtime/profiling/profile.py`` writes them); ``speed_probe.csv`` is read when present.
Errors name the file, the row and the column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.config import LaminarConfig, load_config
from laminar.errors import LaminarError, TraceError

ENGINE_COLUMNS = ("replica_id", "at_s", "step_s", "decode_seqs", "prefill_tokens", "kv_tokens")
TRAINER_COLUMNS = ("step", "train_s", "publish_s", "tokens", "tokens_sq")
LOAD_COLUMNS = ("replica_id", "at_s", "load_s")
SPEED_COLUMNS = ("at_s", "matmul_s", "python_s")
MACHINE_KEYS = ("mode", "rollout_cpus", "trainer_threads", "kv_capacity_tokens", "weight_bytes")
MACHINE_KEYS += ("params", "cpu_model", "model")


class RunDirError(LaminarError):
    """A run directory lacks a file calibration needs, or a file is malformed."""


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
    lengths: pd.DataFrame | None = None  # step, length (prompt + response) of each trajectory
    speed: pd.DataFrame | None = None  # the machine-speed probe's rows (None: not recorded)


def read_run(path: str | Path) -> RunData:
    """Everything calibration reads from one run directory (module docstring)."""
    root = Path(path)
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory (expected a `laminar train` run directory)")
    cfg_path = root / "config.yaml"
    if not cfg_path.is_file():
        raise RunDirError(f"{cfg_path}: missing (is {root} a `laminar train` run directory?)")
    config = load_config(cfg_path)
    prof = root / "profile"
    machine = _json(prof / "machine.json")
    missing = [k for k in MACHINE_KEYS if k not in machine]
    if missing:
        raise RunDirError(f"{prof / 'machine.json'}: missing key '{missing[0]}'")
    return RunData(
        path=root,
        config=config,
        summary=_json(root / "summary.json"),
        machine=machine,
        engine=_csv(prof / "engine_steps.csv", ENGINE_COLUMNS),
        trainer=_csv(prof / "trainer_steps.csv", TRAINER_COLUMNS),
        loads=_csv(prof / "weight_loads.csv", LOAD_COLUMNS),
        lengths=_lengths(root / "trajectories.parquet"),
        speed=read_speed_probe(prof / "speed_probe.csv"),
    )


def step_timeline(root: Path, setup_s: float) -> pd.DataFrame | None:
    """Each trainer step of the run in ``root`` on the job clock, from ``steps.csv`` (None
    without one): ``step``; ``before_s`` (sync runs generate first, ``gen_s``; laminar runs
    wait for data, ``wait_s``); ``train_s``; ``took_s``, the step's wall seconds (before, train,
    publish back to back); ``train_start_s`` and ``end_s``, counted from the loop's start at
    ``setup_s``."""
    path = root / "steps.csv"
    if not path.is_file():
        return None
    st = pd.read_csv(path)
    before = st["gen_s"] if "gen_s" in st else st["wait_s"]
    took = before + st["train_s"] + st["publish_s"]
    end = setup_s + took.cumsum()
    return pd.DataFrame({"step": st["step"], "before_s": before, "train_s": st["train_s"],
                         "took_s": took, "train_start_s": end - took + before,
                         "end_s": end})  # fmt: skip


def read_speed_probe(path: Path) -> pd.DataFrame | None:
    """The speed probe's rows (``laminar/runtime/profiling/speedprobe.py``); None for a run recorded
    without it."""
    if not path.is_file():
        return None
    df = _csv(path, SPEED_COLUMNS)
    bad = (df["matmul_s"] <= 0) | (df["python_s"] <= 0)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        col = "matmul_s" if df["matmul_s"].iloc[row - 1] <= 0 else "python_s"
        raise TraceError(str(path), "expected seconds > 0", row=row, column=col)
    return df


def _lengths(path: Path) -> pd.DataFrame | None:
    """Each consumed trajectory's step and length, from the run's trace (None without one: the
    trainer's fit then counts unpadded tokens)."""
    if not path.is_file():
        return None
    try:
        df = pd.read_parquet(path, columns=["step", "prompt_len", "response_len"])
    except Exception as e:  # pyarrow raises several kinds for a damaged file
        raise RunDirError(f"{path}: cannot read: {e}") from None
    return pd.DataFrame({"step": df["step"], "length": df["prompt_len"] + df["response_len"]})


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing (a run from before profiling was recorded?)") from None
    except (OSError, json.JSONDecodeError) as e:
        raise RunDirError(f"{path}: cannot read: {e}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data


def _csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing (a run from before profiling was recorded?)") from None
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(columns=list(columns))
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: cannot parse: {e}") from None
    for col in columns:
        if col not in df.columns:
            raise TraceError(str(path), "missing column", column=col)
    for col in columns:
        if col == "replica_id":
            continue
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() | (values < 0) | np.isinf(values.to_numpy(float))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0]) + 1
            raise TraceError(str(path), f"expected a number >= 0, got {df[col].iloc[row - 1]!r}",
                             row=row, column=col)  # fmt: skip
        df[col] = values
    return df
