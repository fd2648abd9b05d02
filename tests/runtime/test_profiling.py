"""The calibration profile a run records (``laminar/runtime/profiling/profile.py``), no engines."""

from __future__ import annotations

import json

import pandas as pd

from laminar.config import load_config
from laminar.runtime.profiling.profile import ENGINE_COLUMNS, EngineStepRecorder, write_profile
from laminar.runtime.records import Traj


def test_recorder_samples_with_a_doubling_stride():
    rec = EngineStepRecorder("r0", t0_s=100.0, max_rows=8)
    for i in range(40):
        rec.record(100.0 + i, [0.01, 0.03, 0.02], 0, 0, 30, 0.1, 3, 0)
    rows = rec.table()
    assert len(rows) < 8 and rec.stride > 1  # thinned, and sampled less often since
    assert all(r[2] == 0.02 and r[3] == 3 for r in rows)  # median latency, decoded sequences
    assert [r[1] for r in rows] == sorted(r[1] for r in rows)  # job clock, in order
    rec.record(200.0, [], 2, 40, 0, 0.0, 2, 0)  # a prefill-only step has no timing: skipped
    assert len(rec.table()) == len(rows)


def test_write_profile(tmp_path):
    cfg = load_config(preset="tiny-cpu")
    traj = Traj("p0-s0", 0, 0, (1, 2, 3), 0, 16, tokens=[4, 5])
    result = {
        "rollout_stats": [
            {"replica_id": "r0", "loads": [(1.0, 1, 0.02)], "kv_capacity_tokens": 1000,
             "engine_steps": [("r0", 0.5, 0.01, 4, 0, 0, 40, 0.1, 4, 0)]},
        ],
        "steps": [{"step": 0, "train_s": 0.2, "train_cpu_s": 0.1, "publish_s": 0.01,
                   "wait_s": 0.3, "tokens": 5, "trajectories": 1, "loadavg_1m": 1.0}],
        "ledger": [{"traj": traj, "consumed_version": 0, "step": 0}],
        "info": {"params": 10, "weight_bytes": 40},
    }
    write_profile(cfg, result, tmp_path)
    prof = tmp_path / "profile"
    assert list(pd.read_csv(prof / "engine_steps.csv").columns) == ENGINE_COLUMNS
    tr = pd.read_csv(prof / "trainer_steps.csv")
    assert tr.loc[0, "tokens_sq"] == 25  # (3 prompt + 2 response tokens) squared
    loads = pd.read_csv(prof / "weight_loads.csv")
    assert loads.loc[0, "bytes"] == 40 and loads.loc[0, "load_s"] == 0.02
    machine = json.loads((prof / "machine.json").read_text())
    assert machine["rollout_cpus"] == [[1], [1]] and machine["trainer_cpus"] == [0]
    assert machine["kv_capacity_tokens"] == 1000 and machine["mode"] == "laminar"


def test_a_wrapped_engine_still_reports_its_steps():
    """The rollout listens to the engine that runs the steps, behind any wrapper."""
    from laminar.runtime.rollout.node import LoadRecorder
    from laminar.runtime.rollout.worker import _innermost

    class Inner:
        step_listener = None

    inner = Inner()
    assert _innermost(LoadRecorder(LoadRecorder(inner))) is inner
    assert _innermost(inner) is inner
