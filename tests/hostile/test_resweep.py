"""Regressions from the hostile re-sweep of issue 32 (benchmarks/hostile_sweep.py).

Each test is a case the sweep found ending in a traceback, a hang, a loss of data or a
nonsense input accepted, reduced to its boundary: exit 2 and one line naming what is wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from laminar.cli import main
from tests.hostile.rundirs import tree

TRACE = Path(__file__).resolve().parents[2] / "traces" / "dapo-math-small.csv"


def _refused(capsys, args: list[str], *words: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("laminar: error: ") and err.count("\n") == 1, err
    for w in words:
        assert w in err, err
    return err


def _special(path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--out", "node", "--force"],
        ["trace", "synth", "dapo-math", "--steps", "1", "-o", "node"],
        ["trace", "show", "t.csv", "--plot", "node"],
    ],
)
def test_an_output_never_replaces_a_device_or_fifo(tmp_path, monkeypatch, capsys, kind, args):
    """`simulate --out /dev/null --force` replaced /dev/null with a run directory (found by the
    re-sweep, as root); `-o /dev/null` would have made it a regular file."""
    monkeypatch.chdir(tmp_path)
    _special(tmp_path / "node", kind)
    shutil.copy(TRACE, tmp_path / "t.csv")
    before = tree(tmp_path)
    _refused(capsys, args, "node", "never replaces")
    assert tree(tmp_path) == before
    mode = os.lstat(tmp_path / "node").st_mode
    assert stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _train_like(root):
    """A directory marked as a `laminar train` run (what the output rules read)."""
    run = root / "train"
    (run / "profile").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "profile" / "engine_steps.csv").write_text("a\n1\n")
    marker = {"laminar": "0", "command": "train", "entries": ["config.yaml", "profile"]}
    (run / ".laminar-run.json").write_text(json.dumps(marker))
    return run


@pytest.mark.parametrize("out", ["train/config.yaml", "train/profile", "train/profile/"])
def test_simulate_never_writes_into_what_a_training_run_holds(tmp_path, monkeypatch, capsys,
                                                             out):  # fmt: skip
    """`simulate --out TRAIN/config.yaml --force` replaced the run's config with a simulation;
    `--out TRAIN/profile --force` added a simulation's files to the run's profile."""
    monkeypatch.chdir(tmp_path)
    _train_like(tmp_path)
    before = tree(tmp_path)
    _refused(capsys, ["simulate", "--out", out, "--force"], "`laminar train` run directory")
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["calibrate", "cal", "-o", "small.yaml"], [".json"]),
        (["trace", "show", "t.csv", "--plot", "small.yaml"], [".png"]),
        (["trace", "synth", "dapo-math", "--steps", "1", "-o", "small.yaml"], [".csv"]),
    ],
)
def test_a_single_file_output_must_have_its_formats_suffix(tmp_path, monkeypatch, capsys, args,
                                                           words):  # fmt: skip
    """`calibrate RUN -o config.yaml` wrote JSON over a YAML config; `trace show --plot
    x.yaml` ended in matplotlib's ValueError traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.yaml").write_text("cluster: {gpus: 16}\n")
    shutil.copy(TRACE, tmp_path / "t.csv")
    before = tree(tmp_path)
    _refused(capsys, args, "small.yaml", *words)
    assert tree(tmp_path) == before


def test_an_output_name_too_long_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """A 300-byte name failed only when the finished run was moved into place (exit 1)."""
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["simulate", "--out", "x" * 300], "255")
    _refused(capsys, ["trace", "synth", "dapo-math", "-o", "y" * 300 + ".csv"], "255")
    assert list(tmp_path.iterdir()) == []


PLAN = ["plan", "--set", "workload.steps=4", "--set", "sim.warmup_steps=1", "--gpus", "16",
        "--systems", "laminar", "--tp", "1", "--max-batch", "64", "--trainer-fractions",
        "0.25", "--repack", "on", "--out", "p"]  # fmt: skip


def test_plan_never_puts_its_cache_in_a_run_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _train_like(tmp_path)
    before = tree(tmp_path)
    for cache in ["train", "train/profile", "train/new"]:
        _refused(capsys, [*PLAN, "--cache-dir", cache], "--cache-dir", "run directory")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("flag", ["--gpus", "--tp", "--trainer-fractions"])
def test_plan_refuses_an_empty_value_in_a_list(tmp_path, monkeypatch, capsys, flag):
    """`--gpus 16,,32` was read as 16,32."""
    monkeypatch.chdir(tmp_path)
    argv = list(PLAN)
    value = {"--gpus": "16,,32", "--tp": "1,,2", "--trainer-fractions": "0.25,"}[flag]
    argv[argv.index(flag) + 1] = value
    _refused(capsys, argv, flag, "empty value")


@pytest.mark.parametrize("text", ["1-", "1,,2", "0-1,", ",3"])
def test_a_cpu_list_with_a_gap_is_refused_where_it_enters(capsys, text):
    """`runtime.trainer_cpus=1-` passed the config checks and `laminar train` started."""
    key = "runtime.trainer_cpus"
    _refused(capsys, ["config", "show", "--set", f"{key}={text}"], key)
    _refused(capsys, ["config", "show", "--set", f"runtime.cpu_binds=['{text}']"],
             "runtime.cpu_binds")  # fmt: skip


def test_a_run_table_cut_off_mid_row_is_refused(tmp_path):
    """A steps.csv truncated mid-row was drawn as if whole (pandas fills the missing fields)."""
    from laminar.runfiles.tables import Number, RunDirError, read_csv

    path = tmp_path / "steps.csv"
    path.write_text("step,a,b\n0,1.5,2\n1,2.5,3\n2,3.")
    with pytest.raises(RunDirError, match=r"row 3: 2 fields, the header has 3"):
        read_csv(path, {"step": Number(), "a": Number(), "b": Number()}, kind="steps")


def test_kv_table_counts_are_checked(tmp_path):
    """Negative token and trajectory counts in a training run's kv.csv were drawn."""
    from laminar.runfiles.tables import RunDirError
    from laminar.runfiles.train import read_kv

    head = "at_s,replica_id,version,kv_usage,kv_tokens,trajectories,gen_tokens\n"
    (tmp_path / "kv.csv").write_text(head + "0.1,r0,0,0.5,10,1,5\n0.2,r0,0,0.5,-76,1,5\n")
    with pytest.raises(RunDirError, match=r"row 2, column 'kv_tokens'"):
        read_kv(tmp_path)
    (tmp_path / "kv.csv").write_text("at_s,replica_id,kv_usage\n0.1,r0,0.5\n")  # older runs
    assert len(read_kv(tmp_path)) == 1


def test_a_replica_larger_than_the_rollout_share_names_rollout_tp(tmp_path, monkeypatch, capsys):
    """`rollout_tp: 16` on 16 GPUs was refused as 'no GPU is left for a rollout replica'."""
    monkeypatch.chdir(tmp_path)
    args = ["simulate", "--set", "cluster.gpus=16", "--set", "model.rollout_tp=16", "--set",
            "workload.steps=4", "--set", "sim.warmup_steps=1", "--out", "o"]  # fmt: skip
    _refused(capsys, args, "rollout_tp", "16-GPU rollout replica")
    assert list(tmp_path.iterdir()) == []


def test_resume_of_a_run_whose_config_is_empty_is_refused(tmp_path, monkeypatch, capsys):
    """An emptied config.yaml passed every check of --resume: the checkpoint would have gone
    on under the built-in defaults."""
    from tests.hostile.rundirs import train_run

    monkeypatch.chdir(tmp_path)
    run = train_run(tmp_path)
    shutil.rmtree(tmp_path / ".pools-system", ignore_errors=True)
    (run / "config.yaml").write_text("")
    before = tree(tmp_path)
    _refused(capsys, ["train", "--resume", "train", "--address", "127.0.0.1:1"],
             "config.yaml", "is empty")  # fmt: skip
    assert tree(tmp_path) == before


@pytest.mark.parametrize("kind", ["dir", "fifo"])
def test_resume_refuses_a_marker_that_is_not_a_file(tmp_path, monkeypatch, capsys, kind):
    """A directory or FIFO in place of .laminar-run.json passed --resume's checks; rewriting
    the marker would have failed only after the engines started."""
    from laminar.rundir import MARKER
    from tests.hostile.rundirs import train_run

    monkeypatch.chdir(tmp_path)
    run = train_run(tmp_path)
    shutil.rmtree(tmp_path / ".pools-system", ignore_errors=True)
    (run / MARKER).unlink()
    (run / MARKER).mkdir() if kind == "dir" else os.mkfifo(run / MARKER)
    before = tree(tmp_path)
    _refused(capsys, ["train", "--resume", "train", "--address", "127.0.0.1:1"], MARKER)
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--steps", "1"], ["--steps", "already holds 3 steps"]),
        (["--set", "runtime.model.hidden=256"], ["runtime.model.hidden", "cannot change"]),
        (["--set", "model.name=qwen2.5-7b"], ["model.name", "cannot change"]),
        (["--mode", "sync"], ["--mode", "runtime.mode"]),
    ],
)
def test_resume_refuses_what_the_checkpoint_cannot_go_on_with(tmp_path, monkeypatch, capsys,
                                                              extra, words):  # fmt: skip
    """These passed every check of --resume (the sweep's refused-port backstop caught them)."""
    from tests.hostile.rundirs import train_run

    monkeypatch.chdir(tmp_path)
    train_run(tmp_path)
    shutil.rmtree(tmp_path / ".pools-system", ignore_errors=True)
    before = tree(tmp_path)
    _refused(capsys, ["train", "--resume", "train", *extra, "--address", "127.0.0.1:1"], *words)
    assert tree(tmp_path) == before
