"""``laminar plot`` and ``laminar.plotting`` on ``laminar train`` run directories: one run, runs
side by side, and directories that are not runs.

The directories come from the real writer on a real runtime run with fake engines
(``tests/train_rundir.py``): a laminar run whose rollout r1 dies after step 1, and a sync run.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from laminar.cli import main
from laminar.plotting import (
    RunDirError,
    kv_table,
    load_train_run,
    run_kind,
    step_table,
    train_kv_figure,
    train_reward_figure,
    train_staleness_figure,
    train_staleness_table,
    train_throughput_figure,
    train_timeline_figure,
)
from laminar.plotting import train as plotting_train
from laminar.plotting.train import EVENT_STYLE, TRAIN_FILES, run_colors, run_labels
from laminar.rundir import MARKER

from .train_rundir import trainer_step_keys, write_train_run

PNG = b"\x89PNG\r\n\x1a\n"
FIGURES = ["throughput", "reward", "staleness", "kv_util", "timeline", "faults"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    return {
        "laminar": write_train_run(root, "a", mode="laminar", steps=5, crash_at_step=1),
        "sync": write_train_run(root, "b", mode="sync", steps=4),
    }


def _copy(src, tmp_path, name="copy"):
    return shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("plots"))


def test_the_columns_drawn_are_the_ones_the_runtime_writes(runs):
    keys = trainer_step_keys()
    assert set(TRAIN_FILES["steps.csv"]) <= set(keys)  # Trainer.step's row is a steps.csv row
    steps = pd.read_csv(runs["laminar"] / "steps.csv")
    assert list(steps.columns) == keys
    for name, columns in TRAIN_FILES.items():
        if name.endswith(".csv"):
            assert set(columns) <= set(pd.read_csv(runs["laminar"] / name).columns), name
    traj = pd.read_parquet(runs["laminar"] / "trajectories.parquet")
    assert set(TRAIN_FILES["trajectories.parquet"]) <= set(traj.columns)


def test_plot_of_one_train_run_writes_every_figure(runs, tmp_path, capsys):
    run = _copy(runs["laminar"], tmp_path)
    assert run_kind(run) == "train"
    assert main(["plot", str(run)]) == 0
    printed = capsys.readouterr().out.split()
    for name in FIGURES:
        png = run / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == PNG, name
        assert str(png) in printed
    assert not [p for p in run.iterdir() if p.name.startswith(".") and p.name != MARKER]


def test_several_runs_share_one_figure_per_metric(runs, tmp_path):
    out = tmp_path / "compare"
    assert main(["plot", str(runs["laminar"]), str(runs["sync"]), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, *(f"{n}.png" for n in FIGURES)])
    both = [load_train_run(runs["laminar"]), load_train_run(runs["sync"])]
    assert run_labels(both) == ["laminar", "sync"]
    for fig in (train_throughput_figure(both), train_reward_figure(both), train_kv_figure(both)):
        for ax in fig.axes:
            assert len(ax.get_lines()) == 2  # one line per run
            names = [t.get_text() for t in ax.get_legend().get_texts()]
            assert names[0].startswith("laminar") and names[1].startswith("sync")
    bars = train_staleness_figure(both).axes[0].containers
    assert [c.get_label() for c in bars] == ["laminar", "sync"]
    assert len(train_timeline_figure(both).axes) == 2  # a panel per run


def test_runs_of_one_system_are_told_apart_by_directory(runs, tmp_path):
    twin = load_train_run(_copy(runs["laminar"], tmp_path, "again"))
    pair = [load_train_run(runs["laminar"]), twin]
    assert run_labels(pair) == ["laminar (a)", "laminar (again)"]
    assert len(set(run_colors(pair))) == 2
    fig = train_reward_figure(pair)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == run_labels(pair)


def test_timeline_marks_the_recovery_of_the_dead_rollout(runs):
    run = load_train_run(runs["laminar"])
    recoveries = run.events[run.events["kind"] == "recovery"]
    assert list(recoveries["src"]) == ["r1"]  # the manager noticed the crash
    ax = train_timeline_figure(run).axes[0]
    red = EVENT_STYLE["recovery"][0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]  # not the legend's swatches
    marks = [ln.get_xdata()[0] for ln in lines if ln.get_color() == red]
    assert marks == pytest.approx(list(recoveries["at_s"] - run.start_s))
    # One bar per trajectory, from its generation start to its end.
    assert len(ax.collections[0].get_segments()) == len(run.trajectories)


def test_step_table_paces_the_trainer_from_start_to_last_step(runs):
    for name, steps in (("laminar", 5), ("sync", 4)):
        run = load_train_run(runs[name])
        table = step_table(run)
        assert list(table["step"]) == list(range(steps))
        assert (table["step_s"] > 0).all() and (table["idle_s"] >= 0).all()
        assert table["step_s"].sum() == pytest.approx(table["end_s"].iloc[-1])
        # The steps lie within the training loop (summary's wall_s; what follows the last step,
        # e.g. the final evaluation, takes longer on a loaded machine) and carry its tokens.
        wall_s = run.summary["wall_s"]
        assert 0 < table["end_s"].iloc[-1] <= wall_s + 0.05
        assert table["tokens"].sum() == pytest.approx(run.summary["train_tokens_per_s"] * wall_s)


def test_staleness_of_a_sync_run_is_zero(runs):
    sync = load_train_run(runs["sync"])
    assert train_staleness_table(sync).loc[0, "sync"] == 1.0  # synchronous: always on-policy
    both = train_staleness_table([load_train_run(runs["laminar"]), sync])
    assert np.allclose(both.sum(), 1.0)


def test_kv_table_is_a_share_and_stays_within_the_samples(runs):
    run = load_train_run(runs["laminar"])
    data = kv_table(run, points=100)
    assert len(data) == 100 and data["kv_util"].notna().all()
    assert data["kv_util"].min() >= run.kv["kv_usage"].min() - 1e-12
    assert data["kv_util"].max() <= run.kv["kv_usage"].max() + 1e-12
    assert data["t_s"].iloc[0] == pytest.approx(run.kv["at_s"].min() - run.start_s)


# Directories that are not (whole) runs ----------------------------------------------------------


def test_a_directory_of_neither_kind_is_named_with_what_is_missing(tmp_path, capsys):
    (tmp_path / "steps.csv").write_text("step\n0\n")
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "summary.json" in err and "summary.csv" in err
    assert not (tmp_path / "plots").exists()


def test_a_train_run_missing_a_file_is_named(runs, tmp_path, capsys):
    run = _copy(runs["laminar"], tmp_path)
    (run / "kv.csv").unlink()
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert str(run) in err and "kv.csv" in err and "laminar train" in err
    assert not (run / "plots").exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("steps.csv", b"step,tokens\n0,1\n"),  # columns missing
        ("steps.csv", b"\xff\xfe\x00garbage\x00\n"),
        ("trajectories.parquet", b"PAR1 not really"),
        ("summary.json", b"{not json"),
        ("config.yaml", b"runtime: [unclosed"),
    ],
)
def test_a_corrupt_file_is_named_and_nothing_is_written(runs, tmp_path, capsys, name, content):
    run = _copy(runs["laminar"], tmp_path)
    (run / name).write_bytes(content)
    out = tmp_path / "out"
    assert main(["plot", str(runs["sync"]), str(run), "--out", str(out)]) == 2
    assert str(run / name) in capsys.readouterr().err
    assert not out.exists()


def test_kinds_do_not_mix_and_several_runs_need_out(runs, tmp_path, capsys):
    sim = tmp_path / "sim"
    sim.mkdir()
    for name in ("summary.csv", "steps.csv", "trajectories.parquet", "replicas.parquet"):
        (sim / name).touch()
    assert run_kind(sim) == "sim"
    assert main(["plot", str(runs["laminar"]), str(sim), "--out", str(tmp_path / "o")]) == 2
    assert "separately" in capsys.readouterr().err
    assert main(["plot", str(runs["laminar"]), str(runs["sync"])]) == 2
    assert "--out" in capsys.readouterr().err
    with pytest.raises(RunDirError, match="no such directory"):
        run_kind(tmp_path / "nowhere")


def test_a_failure_while_drawing_leaves_out_as_it_was(runs, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def broken(runs):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(plotting_train, "train_reward_figure", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        main(["plot", str(runs["laminar"]), "--out", str(out), "--force"])
    assert [p.name for p in out.iterdir()] == ["notes.txt"]  # throughput.png was drawn first


def test_faults_are_marked_on_the_throughput_timeline(runs, tmp_path):
    import json

    from laminar.plotting import train_faults_figure

    run_dir = _copy(runs["laminar"], tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    start = summary.get("setup_s") or 0.0
    summary["faults"] = [
        {"kind": "kill-relay", "at_s": start + 0.1, "skipped": "one machine"},
        {"kind": "kill-machine", "target": "node-1", "at_s": start + 0.5, "detection_s": 0.2,
         "recovery_s": 0.3, "replacements": ["r4"], "replaced_s": 0.9},
    ]  # fmt: skip
    (run_dir / "summary.json").write_text(json.dumps(summary))
    fig = train_faults_figure(load_train_run(run_dir))
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.texts]
    assert names == ["kill-machine node-1", "r4 serving"]  # the skipped one is not drawn
    back = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    assert [ln.get_xdata()[0] for ln in back] == [pytest.approx(1.4)]  # 0.5 + 0.9
    labels = ax.get_legend_handles_labels()[1]
    assert "fault" in labels and "replacement serving" in labels
    shaded = [p for p in ax.patches if abs(p.get_x() - 0.5) < 1e-9]
    assert shaded and abs(shaded[0].get_width() - 0.5) < 1e-9  # detection + recovery
    assert max(ax.lines[0].get_ydata()) > 0  # generated tokens/s drawn
