"""Bad input, tried as a new user would: each ends in exit 2 and one clear line naming the file,
row or field, never a traceback, a hang or a half-written output (issue 11)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from laminar.cli import main
from laminar.rundir import MARKER

# A cluster small enough that a simulation takes well under a second.
TINY = [
    "cluster.gpus=8",
    "cluster.trainer_fraction=0.25",
    "workload.prompts_per_step=4",
    "workload.samples_per_prompt=2",
    "workload.steps=2",
    "workload.max_prompt_len=128",
    "workload.max_response_len=512",
]
HEADER = "step,prompt_id,sample_index,prompt_len,response_len,finish_reason\n"


def _sets(*extra: str) -> list[str]:
    return [x for s in (*TINY, *extra) for x in ("--set", s)]


def _error(capsys) -> str:
    """The one line the failed command printed (and nothing else)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("laminar: error: "), err
    assert len(err[0]) < 2100
    return err[0]


# Run directories -----------------------------------------------------------------------------


def test_simulate_into_a_users_directory_leaves_it_untouched(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    assert main(["simulate", *_sets(), "--out", str(out)]) == 2
    assert "thesis.tex" in _error(capsys) and "--force" in capsys.readouterr().err + "--force"
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]
    assert (out / "thesis.tex").read_text() == "years of work"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_simulate_replaces_its_own_run_directory_and_force_keeps_user_files(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", *_sets(), "--out", str(out)]) == 0
    assert (out / MARKER).is_file()
    assert main(["simulate", *_sets("seed=1"), "--out", str(out)]) == 0  # its own: replaced
    (out / "notes.txt").write_text("mine")
    assert main(["simulate", *_sets(), "--out", str(out)]) == 2
    assert "notes.txt" in _error(capsys)
    assert main(["simulate", *_sets(), "--out", str(out), "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "summary.csv").is_file()


@pytest.mark.parametrize("where", ["file", "cwd", "parent"])
def test_out_onto_a_file_or_the_working_directory_is_refused(tmp_path, monkeypatch, capsys, where):
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.csv").write_text("precious")
    monkeypatch.chdir(work)
    out = {"file": "data.csv", "cwd": ".", "parent": ".."}[where]
    assert main(["simulate", *_sets(), "--out", out]) == 2
    assert out in _error(capsys)
    assert sorted(p.name for p in work.iterdir()) == ["data.csv"]
    assert (work / "data.csv").read_text() == "precious"


def _forbid(monkeypatch, module: str, name: str) -> list:
    """Replace ``module.name`` by a recorder: the test then shows the work never started."""
    import importlib

    calls: list = []
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, **k: calls.append(a))
    return calls


def test_an_unwritable_out_fails_before_any_work(capsys, monkeypatch):
    # The default preset is a 1024-GPU run: seconds of work, were --out checked after it.
    calls = _forbid(monkeypatch, "laminar.sim", "simulate")
    assert main(["simulate", "--out", "/proc/laminar-run"]) == 2
    assert calls == []
    assert "/proc/laminar-run: cannot write there" in _error(capsys)


def test_plot_out_follows_the_same_rules(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["simulate", *_sets(), "--out", str(run)]) == 0
    mine = tmp_path / "figures"
    mine.mkdir()
    (mine / "keep.png").write_text("mine")
    assert main(["plot", str(run), "--out", str(mine)]) == 2
    assert "keep.png" in _error(capsys)
    assert [p.name for p in mine.iterdir()] == ["keep.png"]
    assert main(["plot", str(run)]) == 0 and main(["plot", str(run)]) == 0  # its own: replaced


# Config files and --set ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\xff\xfe\x00bad", "not UTF-8 text"),
        (b"seed: 1\nseed: 2\n", "line 2: duplicate key 'seed'"),
        (b"cluster:\n  gpus: 8\n  gpus: 16\n", "duplicate key 'gpus'"),
        (
            b'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
            + b"".join(
                f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]\n".encode()
                for p, c in zip("abcde", "bcdef", strict=True)
            ),
            "expands to more than",
        ),
        (b"seed: &a [*a]\n", "recursive alias"),
        (b"seed: " + b"[" * 500 + b"]" * 500, "nested deeper"),
        (b"seed: [" + b"1," * 5000 + b"1]\n", "seed"),
        (b"seed: 2023-13-45\n", "seed: Input should be a valid integer"),
        (b"seed: !!int x\n", "cannot parse a value: line 1: 'x' is not a whole number"),
    ],
)
def test_bad_config_files_are_named(tmp_path, capsys, content, message):
    cfg = tmp_path / "run.yaml"
    cfg.write_bytes(content)
    assert main(["config", "show", str(cfg)]) == 2
    line = _error(capsys)
    assert str(cfg) in line and message in line


@pytest.mark.parametrize(
    "override, message",
    [
        ("cluster.gpus=1", "cluster.gpus"),
        ("workload.source.params.response_median_tokens=-5", "response_median_tokens"),
        ("workload.source.params.response_median_tokens=.nan", "finite"),
        ("workload.source.params.response_sigma=1e30", "response_sigma"),
        ("workload.source.params.min_response_tokens=.inf", "finite"),
        ("workload.source.params=5", "workload.source.params"),
        ("sim.gpu_memory_utilization=.nan", "gpu_memory_utilization"),
        ("seed=-1", "seed"),
        ("sim.rollout_batch_prompts=1000000", "sim.rollout_batch_prompts"),
        ("faults.events=[{type: rollout_machine, at_s: 1, machine: 9}]", "faults.events[0]"),
    ],
)
def test_bad_numbers_fail_at_config_time(capsys, override, message):
    t0 = time.perf_counter()
    assert main(["simulate", *_sets(override), "--out", "/nonexistent-never-written"]) == 2
    assert time.perf_counter() - t0 < 5.0
    line = _error(capsys)
    assert (message in line and "--set" in line) or "config" in line


def test_a_discriminated_section_is_named_by_its_key_path(capsys):
    assert main(["simulate", *_sets("workload.source.params.x=1"), "--out", "/nonexistent"]) == 2
    line = _error(capsys)
    assert "workload.source" in line and "discriminator" not in line and "'x'" in line


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["runtime.kill_trainer_at_step=1", "runtime.checkpoint_every=0"], "checkpoint_every"),
        (["runtime.kill_trainer_at_step=0", "runtime.checkpoint_every=3"], "checkpoint_every"),
        (["runtime.kill_rollout_at_step=1", "runtime.rollouts=1"], "at least 2 rollouts"),
        (["runtime.kill_rollout_at_step=5", "workload.steps=3"], "never happens"),
        (["runtime.faults.inject=[kill-engine@1]", "runtime.rollouts=1"], "at least 2 rollouts"),
        (["runtime.faults.inject=[kill-trainer@0]", "runtime.checkpoint_every=0"], "1..1"),
        (["runtime.faults.inject=[kill-relay@9]", "workload.steps=9"], "never happens"),
    ],
)
def test_fault_injections_that_cannot_happen_are_config_errors(capsys, overrides, message):
    sets = [x for s in overrides for x in ("--set", s)]
    assert main(["config", "show", "--preset", "tiny-cpu", *sets]) == 2
    assert message in _error(capsys)


def test_error_messages_are_bounded(capsys):
    assert main(["config", "show", "--set", "seed=" + "9" * 100_000]) == 2
    assert len(_error(capsys)) < 1000


# CLI numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "synth", "dapo-math", "-o", "t.csv", "--samples-per-prompt", "-3"],
        ["trace", "synth", "dapo-math", "-o", "t.csv", "--seed", "-1"],
        ["trace", "synth", "dapo-math", "-o", "t.csv", "--steps", "99999999999"],
        ["trace", "show", "t.csv", "--max-response-len", "-5"],
        ["bench", "relay", "--link-gbps", "nan"],
        ["train", "--steps", "0"],
    ],
)
def test_bad_cli_numbers_are_blamed_on_the_argument(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "row" not in err
    assert list(tmp_path.iterdir()) == []


def test_nan_generator_parameters_are_refused_by_trace_synth(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["trace", "synth", "dapo-math", "-o", str(out), "--param", "drift_per_step=nan"])
    assert "drift_per_step" in _error(capsys)
    assert not out.exists()


# Trace files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (HEADER + "0,0,0,10,99999999999999999999,stop\n", "above the bound"),
        (HEADER + "0,0,0,10,9000000000000000000,stop\n", "above the bound"),
        (HEADER + "0,0,0,-1,10,stop\n", "below 0"),
        (b"\xff\xfe,a\n1,2\n", "cannot parse CSV"),
    ],
)
def test_bad_traces_are_named(tmp_path, capsys, content, message):
    trace = tmp_path / "t.csv"
    trace.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["trace", "show", str(trace)]) == 2
    line = _error(capsys)
    assert str(trace) in line and message in line
    assert main(["replay", str(trace), *_sets(), "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_a_directory_given_as_a_trace_is_named(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.mkdir()
    assert main(["trace", "show", str(trace)]) == 2
    assert f"{trace}: not a file" in _error(capsys)


def test_string_prompt_ids_replay_and_are_kept(tmp_path, capsys):
    ids = ["d41d8cd98f00b204", "3f2a7c4e-8e0b-4c1e-9b7a-2f6d1c0e5a11", "-7", "18446744073709551615"]
    rows = [f"0,{pid},{i},{10 + k},{20 + 7 * k + i},stop" for k, pid in enumerate(ids)
            for i in range(2)]  # fmt: skip
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "\n".join(rows) + "\n")
    assert main(["trace", "show", str(trace)]) == 0
    assert "groups 4" in capsys.readouterr().out
    out = tmp_path / "run"
    assert main(["replay", str(trace), *_sets(), "--out", str(out)]) == 0
    traj = pd.read_parquet(out / "trajectories.parquet")
    first = traj[traj["epoch"] == 0].sort_values("traj_id")
    assert set(first["source_prompt_id"]) == set(ids)
    by_id = dict(zip(first["source_prompt_id"], first["prompt_len"], strict=False))
    assert [by_id[pid] for pid in ids] == [10, 11, 12, 13]


def test_a_foreign_trace_with_long_prompts_replays_without_set(tmp_path, capsys):
    trace = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:15:{i:02d},{3000 + 500 * i},{40 + 900 * i}" for i in range(8)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    out = tmp_path / "run"
    shape = ["cluster.gpus=8", "workload.prompts_per_step=2", "workload.samples_per_prompt=2",
             "workload.steps=2"]  # fmt: skip
    sets = [x for s in shape for x in ("--set", s)]
    assert main(["replay", str(trace), *sets, "--out", str(out)]) == 0
    cfg = (out / "config.yaml").read_text()
    assert "max_prompt_len: 6500" in cfg and "max_response_len: 6341" in cfg
    traj = pd.read_parquet(out / "trajectories.parquet")
    assert traj["prompt_len"].max() == 6500 and (traj["finish_reason"] == "stop").all()
    # An explicit limit still wins, and still refuses a longer prompt.
    assert main(["replay", str(trace), *sets, "--set", "workload.max_prompt_len=4000",
                 "--out", str(tmp_path / "b")]) == 2  # fmt: skip
    assert "max_prompt_len" in _error(capsys)


def test_a_one_group_trace_replays_with_a_warning_and_is_refused_by_fit(tmp_path, capsys):
    trace = tmp_path / "one.csv"
    trace.write_text(HEADER + "0,0,0,10,100,stop\n0,0,1,10,20,stop\n0,0,2,10,50,stop\n")
    assert main(["replay", str(trace), *_sets(), "--out", str(tmp_path / "run")]) == 0
    assert "laminar: warning:" in capsys.readouterr().err
    assert main(["trace", "fit", str(trace)]) == 2
    assert "one GRPO group" in _error(capsys)


# ``python -m laminar`` with Python's own SIGINT/SIGTERM handlers: a test runner started in the
# background of a non-interactive shell inherits SIGINT ignored (POSIX), its children do too,
# and laminar rightly leaves an ignored signal ignored: the run then finished and exited 0.
_LAMINAR_WITH_DEFAULT_SIGNALS = (
    "import runpy, signal; "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "signal.signal(signal.SIGTERM, signal.SIG_DFL); "
    "runpy.run_module('laminar', run_name='__main__', alter_sys=True)"
)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_during_simulate_leaves_nothing(tmp_path, sig, code):
    import signal
    import subprocess
    import sys

    # The default config (1024 GPUs) for 100 steps simulates for tens of seconds: the signal lands
    # mid-run however loaded the machine is.
    argv = ["simulate", "--set", "workload.steps=100", "--out", "run"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAMINAR_WITH_DEFAULT_SIGNALS, *argv],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".laminar-staging-*")) and time.monotonic() < deadline:
            # (the staging directory, made once the handlers are in place; not the probe)
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert proc.poll() is None
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, proc.stderr.read()
    assert list(tmp_path.iterdir()) == []


def test_train_refuses_an_unwritable_out_before_starting_anything(capsys, monkeypatch):
    calls = _forbid(monkeypatch, "laminar.runtime.run.driver", "train")
    assert main(["train", "--out", "/proc/laminar-train"]) == 2
    assert calls == []
    assert "/proc/laminar-train: cannot write there" in _error(capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--out", "run\x00x"],
        ["config", "show", "c\x00.yaml"],
        ["trace", "show", "t\x00.csv"],
        ["simulate", "--set", 'sim.cost_file="c\\0.json"', "--out", "run"],
    ],
)
def test_a_nul_character_in_a_path_is_named(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "NUL character" in _error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "synth", "dapo-math", "-o", "/proc/laminar.csv"],
        ["trace", "show", "t.csv", "--plot", "/proc/laminar.png"],
        ["calibrate", ".", "-o", "/proc/laminar.json"],
        ["bench", "relay", "--out", "/proc/laminar.json"],
        ["trace", "synth", "dapo-math", "-o", "."],
    ],
)
def test_file_outputs_are_checked_before_any_work(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text(HEADER + "0,0,0,10,100,stop\n0,1,0,10,20,stop\n")
    t0 = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - t0 < 1.0
    line = _error(capsys)
    assert "cannot write there" in line or "is a directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
