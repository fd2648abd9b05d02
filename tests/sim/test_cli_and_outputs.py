"""``laminar simulate``: the run directory, determinism, the summary table, errors."""

from __future__ import annotations

import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.rundir import MARKER
from laminar.sim.results import SUMMARY_COLUMNS
from laminar.traces import read_trace
from laminar.traces.schema import MEASURED_COLUMNS, REQUIRED_COLUMNS

from .conftest import SMALL

FILES = [
    "config.yaml",
    "cost_model.json",
    "summary.csv",
    "steps.csv",
    "trajectories.parquet",
    "replicas.parquet",
]


def _args(out, *extra):
    sets = [x for s in SMALL for x in ("--set", s)]
    return ["simulate", *sets, *extra, "--out", str(out)]


def test_run_directory_and_stdout(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(out, "--systems", "laminar", "--seed", "3")) == 0
    printed = capsys.readouterr().out
    assert "laminar" in printed and "training throughput" in printed and str(out) in printed
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, *FILES])
    cfg = load_config(out / "config.yaml")
    assert cfg.seed == 3 and cfg.cluster.gpus == 8 and cfg.sim.systems == ["laminar"]
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[: len(SUMMARY_COLUMNS)]) == SUMMARY_COLUMNS
    assert summary["steps"].tolist() == [cfg.workload.steps]
    traj = pd.read_parquet(out / "trajectories.parquet")
    assert set(REQUIRED_COLUMNS) | set(MEASURED_COLUMNS) <= set(traj.columns)
    assert set(traj["finish_reason"]) <= {"stop", "length"}
    # A simulated run is a trace: the traces reader takes it back (replay of a simulated run).
    back = read_trace(out / "trajectories.parquet")
    assert len(back) == len(traj) and (back["response_len"] == traj["response_len"]).all()
    reps = pd.read_parquet(out / "replicas.parquet")
    assert {"t_s", "replica_id", "kv_tokens", "running", "waiting"} <= set(reps.columns)
    assert len(pd.read_csv(out / "steps.csv")) == cfg.workload.steps


def test_same_config_and_seed_give_identical_files(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert main(_args(a, "--seed", "7")) == 0
    assert main(_args(b, "--seed", "7")) == 0
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert main(_args(c, "--seed", "8")) == 0
    assert (a / "trajectories.parquet").read_bytes() != (c / "trajectories.parquet").read_bytes()


def test_repack_switch(tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    tight = ["--set", "sim.rollout_batch_prompts=3", "--set", "sim.max_batch=8"]
    assert main(_args(on, *tight)) == 0
    assert main(_args(off, *tight, "--set", "repack.enabled=false")) == 0
    s_on = pd.read_csv(on / "summary.csv").iloc[0]
    s_off = pd.read_csv(off / "summary.csv").iloc[0]
    assert s_on["repack_moves"] > 0 and s_off["repack_moves"] == 0
    assert pd.read_parquet(off / "trajectories.parquet")["moves"].eq(0).all()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--systems", "laminar,nonesuch"], "unknown system 'nonesuch'"),
        (["--set", "sim.warmup_steps=5"], "sim.warmup_steps"),
        (["--set", "workload.max_response_len=1000000"], "workload.max_response_len"),
        (["--set", "model.rollout_tp=3"], "model.rollout_tp"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    assert main(_args(out, *extra)) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def _smallest_cluster(preset: str) -> int:
    """Whole machines (at least 32 GPUs) whose trainer share holds the preset's trainer, by the
    memory check (laminar.specs.memory): the test follows the memory model, not a copy of it."""
    import math

    from laminar.config import load_config
    from laminar.specs.memory import check_fit

    cfg = load_config(preset=preset)
    need = check_fit(cfg).min_trainer_gpus
    per, frac = cfg.cluster.gpus_per_machine, cfg.cluster.trainer_fraction
    trainer_machines = math.ceil(need / per)
    return max(32, per * math.ceil(trainer_machines / frac))


@pytest.mark.parametrize("preset", ["paper-math-7b", "paper-math-32b", "paper-math-72b"])
def test_presets_scale_down(tmp_path, preset):
    out = tmp_path / preset
    gpus = _smallest_cluster(preset)
    sets = ["--set", f"cluster.gpus={gpus}", "--set", "workload.steps=2",
            "--set", "sim.warmup_steps=1"]  # fmt: skip
    assert main(["simulate", "--preset", preset, *sets, "--out", str(out)]) == 0
    s = pd.read_csv(out / "summary.csv").iloc[0]
    assert s["steps"] == 2 and s["gpus"] == gpus and s["train_tokens_per_s"] > 0
    assert s["trainer_gpus"] + s["rollout_gpus"] == gpus


def test_progress_callback_ticks_once_per_trainer_step():
    from laminar.sim import simulate

    from .conftest import small_config

    ticks = []
    result = simulate(small_config(), on_step=lambda system, n: ticks.append((system, n)))
    steps = result.config.workload.steps
    assert ticks == [("laminar", n) for n in range(1, steps + 1)]
    assert set(result.timings_s) == {"workload", "laminar.run", "laminar.tables"}
