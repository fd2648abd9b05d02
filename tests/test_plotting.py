"""``laminar.plotting`` and ``laminar plot RUN_DIR``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from laminar.cli import main
from laminar.plotting import (
    inherent_staleness,
    kv_over_time,
    load_run,
    staleness_table,
    throughput_over_time,
)
from laminar.rundir import MARKER

from .sim.conftest import SMALL


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("plot") / "run"
    sets = [x for s in SMALL for x in ("--set", s)]
    fault = "faults.events=[{type: rollout_machine, at_s: 5, recover_s: 5}]"
    assert main(["simulate", *sets, "--set", "cluster.gpus=16", "--set", fault,
                 "--systems", "laminar,verl", "--out", str(out)]) == 0  # fmt: skip
    return out


def test_plot_writes_every_figure(run_dir, capsys):
    assert main(["plot", str(run_dir)]) == 0
    names = ["throughput", "kv_util", "staleness", "staleness_inherent", "timeline", "lengths"]
    for name in names:
        png = run_dir / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert str(run_dir / "plots" / "timeline.png") in capsys.readouterr().out


def test_plot_of_a_directory_that_is_no_run(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_several_simulated_runs_get_a_subdirectory_each(run_dir, tmp_path):
    out = tmp_path / "out"
    assert main(["plot", str(run_dir), str(run_dir), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "run-1", "run-2"]
    for sub in ("run-1", "run-2"):
        assert (out / sub / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_corrupt_simulated_run_file_is_named(run_dir, tmp_path, capsys):
    run = shutil.copytree(run_dir, tmp_path / "run", ignore=shutil.ignore_patterns("plots"))
    (run / "replicas.parquet").write_bytes(b"PAR1 torn")
    assert main(["plot", str(run)]) == 2
    assert str(run / "replicas.parquet") in capsys.readouterr().err
    assert not (run / "plots").exists()


def test_throughput_over_time_conserves_tokens(run_dir):
    run = load_run(run_dir)
    for system in run.systems:
        bin_s = 2.0
        data = throughput_over_time(run.trajectories, run.steps, system, bin_s)
        t = run.trajectories[run.trajectories["system"] == system]
        s = run.steps[run.steps["system"] == system]
        assert data["gen_tokens_per_s"].sum() * bin_s == pytest.approx(t["generated_tokens"].sum())
        assert data["train_tokens_per_s"].sum() * bin_s == pytest.approx(s["tokens"].sum())
        assert (data["gen_tokens_per_s"] >= -1e-6).all()


def test_kv_over_time_is_a_share_and_matches_the_summary_roughly(run_dir):
    run = load_run(run_dir)
    data = kv_over_time(run.replicas, points=400)
    assert data["kv_util"].between(0.0, 1.0).all()
    for system, rows in data.groupby("system"):
        mean = run.summary.set_index("system").loc[system, "mean_kv_util"]
        assert np.mean(rows["kv_util"]) == pytest.approx(mean, rel=0.35, abs=1e-3)


def test_staleness_table_sums_to_one_per_system(run_dir):
    table = staleness_table(load_run(run_dir).trajectories)
    assert list(table.columns) == ["laminar", "verl"]
    assert np.allclose(table.sum(), 1.0)
    assert table.loc[0, "verl"] == 1.0  # synchronous: always on-policy


def test_inherent_staleness_counts_generation_latency_only(run_dir):
    run = load_run(run_dir)
    t = run.trajectories
    inh = inherent_staleness(t, run.steps)
    c = t["consumed_version"] >= 0
    assert (inh[c] >= 0).all() and (inh[c] <= t.loc[c, "staleness"]).all()
    assert inh[t["gen_end_s"].isna()].isna().all()
    verl = (t["system"] == "verl") & c
    assert (inh[verl] == 0).all()  # synchronous: no update while a batch generates
    table = staleness_table(t, run.steps, kind="inherent")
    assert np.allclose(table.sum(), 1.0)
