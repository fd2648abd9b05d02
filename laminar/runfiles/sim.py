"""The files of a ``laminar simulate`` / ``laminar replay`` run directory (written by
``laminar/sim/api.py``), one reader for ``laminar plot`` and the notebooks: each table's
columns checked (:mod:`laminar.runfiles.tables`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from laminar.runfiles.tables import COUNT, SECONDS, Number, Text, read_csv, read_parquet

RATE = Number(low=0.0)
VERSION = Number(low=-1, whole=True)

SIM_FILES = {
    "summary.csv": {
        "system": Text(), "gpus": COUNT, "sim_time_s": SECONDS, "train_tokens_per_s": RATE,
        "gen_tokens_per_s": RATE,
    },
    "steps.csv": {
        "system": Text(), "end_s": SECONDS, "actor_stall_s": SECONDS, "train_s": SECONDS,
        "tokens": COUNT,
    },
    "trajectories.parquet": {
        "system": Text(), "step": COUNT, "response_len": COUNT, "finish_reason": Text(),
        "epoch": COUNT, "gen_start_s": Number(nullable=True),
        "gen_end_s": Number(nullable=True), "generated_tokens": COUNT,
        "weight_version": VERSION, "consumed_version": VERSION, "staleness": VERSION,
    },
    "replicas.parquet": {
        "system": Text(), "replica_id": Text(), "t_s": SECONDS, "kv_tokens": COUNT,
        "kv_peak_tokens": COUNT, "kv_capacity_tokens": COUNT,
    },
}  # fmt: skip
"""Each file a simulated run directory must hold, and the columns read from it."""

FAULTS = {"system": Text(), "t_s": SECONDS, "fault": Text()}
"""``faults.csv`` (only when faults were injected)."""


def read_sim_table(run_dir: str | Path, name: str) -> pd.DataFrame:
    """The table ``name`` (a key of :data:`SIM_FILES`) of the simulated run ``run_dir``."""
    path = Path(run_dir) / name
    read = read_parquet if name.endswith(".parquet") else read_csv
    return read(path, SIM_FILES[name], kind=f"simulation table ({name})")


def read_sim_faults(run_dir: str | Path) -> pd.DataFrame:
    """``faults.csv`` (an empty table when the run injected none)."""
    path = Path(run_dir) / "faults.csv"
    if not path.exists():
        return pd.DataFrame()
    return read_csv(path, FAULTS, kind="faults table (faults.csv)")
