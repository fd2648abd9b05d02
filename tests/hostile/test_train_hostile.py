"""``laminar train`` refuses what cannot run, at the boundary (issue 32, "train").

Each hostile ``--fault``, fault in a config, ``--address`` or ``--resume`` must end with exit 2,
one line naming the flag or setting and what would be valid, within seconds, and nothing
written. ``RunLog.create`` (the first write of a run) is made to fail the test, so a case that
got past the checks would show here instead of starting a run. A fault that passes the checks
and still does not happen fails the run (exit 3), never exit 0.
"""

from __future__ import annotations

import socket
import time
from collections import defaultdict

import pytest

from laminar.cli import main
from laminar.config.runtime_faults import FaultSpec, parse_fault
from laminar.runtime.run.outputs import skipped_faults


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch):
    """A hostile case that passes the checks would create its run directory: fail instead."""
    from laminar.runtime.run.resume import RunLog

    def refuse(*args, **kwargs):
        raise AssertionError("got past the boundary checks: a run was about to be written")

    monkeypatch.setattr(RunLog, "create", refuse)
    monkeypatch.setattr(RunLog, "reopen", refuse)


def _refused(capsys, tmp_path, argv: list[str], *words: str, within_s: float = 10.0) -> str:
    out = tmp_path / "run"
    t = time.perf_counter()
    assert main(["train", "--no-progress", "--out", str(out), *argv]) == 2
    took = time.perf_counter() - t
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("laminar: error: "), err
    assert all(w in err[0] for w in words), err[0]
    assert took < within_s, f"took {took:.1f} s"
    assert not out.exists()
    return err[0]


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("kill-rollout@inf", ["WHEN 'inf'", "90s"]),
        ("kill-rollout@nan", ["WHEN 'nan'"]),
        ("kill-rollout@-1", ["WHEN '-1'"]),
        ("kill-rollout@1e400s", ["WHEN '1e400s'"]),
        ("kill-rollout@" + "9" * 400 + "s", ["characters", "at most 200"]),  # float(): inf
        ("kill-rollout@99999999999", ["never happens", "workload.steps 40"]),
        ("kill-rollout@99999999999s", ["never happens", "step_timeout_s", "0s..72000s"]),
        ("kill-rollout@40", ["never happens", "steps 0..39"]),
        ("kill-nothing@1", ["unknown kind", "kill-rollout"]),
        ("kill-rollout:r99@1", ["no rollout 'r99'", "r0..r1"]),
        ("kill-engine:r2@1", ["no rollout 'r2'"]),
        ("kill-rollout:@1", ["target ''"]),
        ("kill-relay@1", ["relay.enabled=true"]),
        ("kill-machine@1", ["several machines", "runtime.address"]),
        ("kill-trainer:r0@1", ["no target"]),
        ("", ["expected KIND"]),
        ("   ", ["expected KIND"]),
        ("kill-rollout@１", ["WHEN"]),  # a fullwidth digit: ASCII only
        ("kill-rollout:r١@1", ["target"]),  # an Arabic-Indic digit
        ("kíll-rollout@1", ["unknown kind"]),
        ("kill-rollout:r1\n@1", ["target"]),  # a newline inside ($ would let it through)
        ("kill-rollout@1@2", ["expected KIND"]),
    ],
)
def test_hostile_fault_flags_are_refused(capsys, tmp_path, fault, words):
    _refused(capsys, tmp_path, ["--fault", fault], "--fault", *words)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--set", "runtime.rollouts=1", "--fault", "kill-rollout@1s"], ["at least 2 rollouts"]),
        (
            [*("--set", "runtime.rollouts=1", "--set", "runtime.faults.replace_dead=false"),
             *("--fault", "kill-engine:r0@1")],
            ["replace_dead is false"],
        ),
        (["--set", "relay.enabled=true", "--fault", "kill-relay@1"], ["a local Ray is one"]),
        (["--set", "relay.enabled=true", "--fault", "kill-relay:3@1"], ["no relay '3'"]),
        (["--fault", "kill-rollout@1", "--fault", "kill-rollout@1"], ["given twice"]),
        (["--set", "runtime.checkpoint_every=0", "--fault", "kill-trainer@2"], ["1..3"]),
    ],
)
def test_faults_that_this_config_cannot_carry_out_are_refused(capsys, tmp_path, argv, words):
    _refused(capsys, tmp_path, argv, "--fault", *words)


@pytest.mark.parametrize(
    ("inject", "words"),
    [
        ("[kill-rollout:r99@1]", ["runtime.faults.inject kill-rollout:r99@1", "no rollout"]),
        ("[kill-relay@5s]", ["kill-relay@5s", "relay.enabled"]),
        ("[kill-machine:m0@1]", ["several machines"]),
        ("[kill-rollout@99999999s]", ["kill-rollout@99999999s never happens"]),
        ("[kill-rollout@nan]", ["WHEN 'nan'"]),
        ("[kill-rollout@2, kill-rollout@2]", ["given twice"]),
    ],
)
def test_faults_in_the_config_are_checked_when_it_loads(capsys, tmp_path, inject, words):
    _refused(capsys, tmp_path, ["--set", f"runtime.faults.inject={inject}"], *words)


def test_older_fault_settings_are_checked_too(capsys, tmp_path):
    _refused(capsys, tmp_path, ["--set", "runtime.kill_rollout_at_step=40"], "never happens")


@pytest.mark.parametrize(
    "address",
    ["bogus", "host:notaport", ":0", "http://x", "ray://head:10001", "h:70000", "h:0", "[::1]"],
)
def test_malformed_addresses_are_refused_before_any_connection(capsys, tmp_path, address):
    line = _refused(capsys, tmp_path, ["--address", address], "--address", within_s=3.0)
    assert "HOST:PORT" in line


def test_a_refused_port_fails_fast(capsys, tmp_path):
    with socket.socket() as s:  # a port nothing listens on: bound, never listened
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        line = _refused(capsys, tmp_path, ["--address", f"127.0.0.1:{port}"], "runtime.address")
    assert "cannot connect" in line and "ray start --head" in line


def test_an_unknown_host_fails_fast(capsys, tmp_path):
    line = _refused(capsys, tmp_path, ["--address", "no-such-host.invalid:6379"], "no such host")
    assert "no-such-host.invalid" in line


def test_a_port_that_is_not_ray_fails_within_the_bound(capsys, tmp_path, monkeypatch):
    """Something listens but is not Ray's GCS: ray.init would retry for minutes; the probe's
    child is killed at its bound (shortened here)."""
    from laminar.runtime.run import address

    monkeypatch.setattr(address, "GCS_TIMEOUT_S", 4.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        argv = ["--address", f"127.0.0.1:{s.getsockname()[1]}"]
        line = _refused(capsys, tmp_path, argv, "runtime.address", within_s=20.0)
    assert "no Ray GCS within 4 s" in line or "not a Ray cluster" in line


@pytest.mark.parametrize("resume", ["", "   "])
def test_an_empty_resume_is_refused_not_a_new_run(capsys, tmp_path, resume):
    assert main(["train", "--no-progress", "--resume", resume]) == 2
    assert "--resume: is empty" in capsys.readouterr().err


def test_resume_of_what_is_not_a_training_run_is_refused(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    for target in (tmp_path / "file", tmp_path, tmp_path / "missing"):
        assert main(["train", "--no-progress", "--resume", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(target) in err[0], err


def test_seconds_round_trip_without_exponents():
    for text in ("kill-rollout@90s", "kill-relay@2.5s", "kill-rollout@1000000s"):
        assert parse_fault(text).text() == text
    spec = FaultSpec("kill-rollout", at_s=1e-5)
    assert parse_fault(spec.text()) == spec and "e" not in spec.text().split("@")[1]


def test_a_skipped_fault_fails_the_run_with_exit_3(tmp_path, monkeypatch, capsys):
    """A fault the supervisor could not carry out (here: the run ended first) is recorded
    with why, and ``laminar train`` exits 3 naming it instead of 0."""
    from laminar.cli import train_cmd
    from laminar.runtime.run import driver, outputs
    from laminar.runtime.run.resume import RunLog

    monkeypatch.undo()  # this one writes its (fake) run directory
    summary = defaultdict(int)  # the figures it prints: 0
    summary["faults"] = [{"kind": "kill-rollout", "spec": "kill-rollout@30s",
                          "skipped": "the run ended first"}]  # fmt: skip
    monkeypatch.setattr(driver, "train", lambda cfg, **kw: {})
    monkeypatch.setattr(outputs, "write_run_dir", lambda cfg, result, out: summary)
    monkeypatch.setattr(RunLog, "mark", lambda self: None)
    out = tmp_path / "run"
    argv = ["train", "--no-progress", "--steps", "2", "--fault", "kill-rollout@30s"]
    assert main([*argv, "--out", str(out)]) == train_cmd.EXIT_LEDGER == 3
    err = capsys.readouterr().err
    assert "scheduled faults did not happen: kill-rollout@30s (the run ended first)" in err
    assert skipped_faults({"faults": [{"kind": "kill-relay"}]}) == ""
