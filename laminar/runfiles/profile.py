"""The ``profile/`` files of a ``laminar train`` run directory (written by
``laminar/runtime/profiling/profile.py``), one reader each: what ``laminar calibrate`` fits the
simulator to. Every number it fits from is checked finite and in range here, so a damaged
file is refused by name rather than turned into shifted coefficients.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from laminar.runfiles.tables import (
    COUNT,
    SECONDS,
    Number,
    Text,
    field,
    file_error,
    read_csv,
    read_json_object,
    text_field,
)
from laminar.runfiles.train import MODES

ENGINE = {
    "replica_id": Text(required=True), "at_s": SECONDS, "step_s": SECONDS, "decode_seqs": COUNT,
    "prefill_tokens": COUNT, "kv_tokens": COUNT, "running": COUNT,
}  # fmt: skip
"""``engine_steps.csv``: sampled engine steps (``running`` is optional: older runs lack it)."""
ENGINE_NEED = ("replica_id", "at_s", "step_s", "decode_seqs", "prefill_tokens", "kv_tokens")

TRAINER = {
    "step": COUNT, "train_s": SECONDS, "publish_s": SECONDS, "tokens": COUNT,
    "tokens_sq": COUNT, "train_cpu_s": SECONDS,
}  # fmt: skip
"""``trainer_steps.csv``: each trainer step's seconds and tokens (``train_cpu_s`` optional)."""
TRAINER_NEED = ("step", "train_s", "publish_s", "tokens", "tokens_sq")

LOADS = {"replica_id": Text(required=True), "at_s": SECONDS, "load_s": SECONDS}
"""``weight_loads.csv``: each rollout's weight loads."""

SPEED = {
    "at_s": SECONDS,
    "matmul_s": Number(low=0.0, low_open=True),
    "python_s": Number(low=0.0, low_open=True),
}
"""``speed_probe.csv``: the machine-speed probe (``laminar/runtime/profiling/speedprobe.py``)."""

CORE_CPU = {"at_s": Number(), "core": Number(low=-1.0, whole=True), "what": Text(required=True),
            "cpu_s": SECONDS}
"""``core_cpu.csv``: each core's busy seconds and the job's CPU on it, every probe tick
(``laminar/runtime/profiling/corecpu.py``; core -1: the job's unpinned processes)."""
CORE_CPU_KINDS = ("busy", "pinned", "engine", "unpinned")

MACHINE_KEYS = ("mode", "rollout_cpus", "trainer_threads", "kv_capacity_tokens", "weight_bytes")
MACHINE_KEYS += ("params", "cpu_model", "model")
POSITIVE = Number(low=0.0, low_open=True)
WHOLE_POSITIVE = Number(low=1.0, whole=True)


def read_profile_table(run_dir: str | Path, name: str) -> pd.DataFrame:
    """``profile/<name>.csv`` (``engine_steps``, ``trainer_steps`` or ``weight_loads``)."""
    spec, need = {"engine_steps": (ENGINE, ENGINE_NEED), "trainer_steps": (TRAINER, TRAINER_NEED),
                  "weight_loads": (LOADS, tuple(LOADS))}[name]  # fmt: skip
    path = Path(run_dir) / "profile" / f"{name}.csv"
    if not path.exists():
        raise file_error(path, "missing (a run from before profiling was recorded?)")
    return read_csv(path, spec, kind=f"profile table ({name}.csv)", need=need)


def read_speed_probe(path: Path) -> pd.DataFrame | None:
    """The speed probe's rows; None for a run recorded without it."""
    if not path.exists():
        return None
    return read_csv(path, SPEED, kind="speed probe (speed_probe.csv)")


def read_core_cpu(path: Path) -> pd.DataFrame | None:
    """The core rows beside the speed probe; None for a run recorded without them."""
    if not path.exists():
        return None
    frame = read_csv(path, CORE_CPU, kind="core CPU (core_cpu.csv)")
    bad = ~frame["what"].astype(str).isin(CORE_CPU_KINDS)
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise file_error(path, f"expected one of {', '.join(CORE_CPU_KINDS)}, got "
                               f"{str(frame['what'].iloc[row])!r}", row=row + 1,
                         column="what")  # fmt: skip
    return frame


def read_machine(run_dir: str | Path) -> dict:
    """``profile/machine.json``: where everything ran; the keys calibration uses, checked."""
    path = Path(run_dir) / "profile" / "machine.json"
    if not path.exists():
        raise file_error(path, "missing (a run from before profiling was recorded?)")
    m = read_json_object(path, kind="machine description (machine.json)")
    missing = [k for k in MACHINE_KEYS if k not in m]
    if missing:
        raise file_error(path, f"missing key '{missing[0]}'")
    text_field(m, "mode", path, choices=MODES)
    for key in ("cpu_model", "model"):
        if not isinstance(m[key], str):
            raise file_error(path, f"{key}: expected text, got {type(m[key]).__name__}")
    _cpu_lists(m["rollout_cpus"], path, "rollout_cpus")
    if m.get("trainer_cpus") is not None:
        _cpus(m["trainer_cpus"], path, "trainer_cpus")
    for key in ("trainer_threads", "kv_capacity_tokens"):
        field(m, key, WHOLE_POSITIVE, path)
    for key in ("weight_bytes", "params"):
        field(m, key, POSITIVE, path)
    for key in ("max_batch", "layers", "hidden"):
        field(m, key, Number(low=1.0, whole=True, nullable=True), path)
    return m


def _cpu_lists(value: object, path: Path, key: str) -> None:
    if not isinstance(value, list) or not value:
        raise file_error(path, f"{key}: expected a list of each rollout's CPU list")
    for i, cpus in enumerate(value):
        _cpus(cpus, path, f"{key}[{i}]")


def _cpus(value: object, path: Path, key: str) -> None:
    ok = isinstance(value, list) and all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 1 << 20 for c in value
    )
    if not ok:
        raise file_error(path, f"{key}: expected a list of CPU numbers, got {str(value)[:40]}")
