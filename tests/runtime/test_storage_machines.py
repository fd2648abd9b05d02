"""``runtime.storage`` on emulated machines that share no filesystem with the driver (issue 28,
item 1): each machine's processes refuse the driver's files (``EmulatedCluster.driver_root``),
so a checkpoint or model written at the driver's path on a trainer's machine fails here as it
would on a real cluster.

One run carries every check: 2 trainer ranks train, the trainer is killed and restarts from a
checkpoint pushed back to its machine, the driver is stopped with SIGTERM, ``--resume`` goes
on from the newest checkpoint (the SIGTERMed session ended cleanly: nothing of it to reap),
and the final model arrives, loadable, in the driver's run
directory; nothing of it is left on the machines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.runtime.test_train_e2e import warmup_sets

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def apart():
    """Two machines; the driver's files are its own."""
    from laminar.runtime.cluster.emulate import EmulatedCluster

    with EmulatedCluster(machines=2, gpus_per_machine=0, cpus_per_machine=4) as emu:
        yield emu


def test_a_shared_path_no_machine_sees_is_refused_naming_the_machine(apart, tmp_path):
    import ray

    from laminar.runtime.cluster.nodes import alive_nodes
    from laminar.runtime.run.storage import StorageError, check_shared

    apart.connect()
    try:
        machines = alive_nodes()
        check_shared(tmp_path / "nfs", machines)  # the host's own paths: every machine sees them
        with pytest.raises(StorageError, match=r"runtime.storage: machine m[01] \(.*cannot write"):
            check_shared(apart.driver_root / "not-shared", machines)
    finally:
        ray.shutdown()


def _laminar(args: list[str], log: Path) -> subprocess.Popen:
    code = "import sys; from laminar.cli import main; sys.exit(main())"
    with open(log, "ab") as f:  # the driver's own lines, for a failure's report
        return subprocess.Popen([sys.executable, "-c", code, *args], stdout=f, stderr=f)


@pytest.mark.timeout(1500)  # two engine start-ups and a trainer restart; ~10 min on a busy host
def test_trainer_kill_sigterm_and_resume_without_a_shared_filesystem(apart, tmp_path):
    run = apart.driver_root / "run"
    steps = 4
    sets = [
        f"runtime.address={apart.address}",
        "runtime.trainer_ranks=2",
        "runtime.checkpoint_every=1",
        "runtime.keep_checkpoints=2",
        "runtime.eval_prompts=0",
        "runtime.rollouts=1",
        "workload.prompts_per_step=2",
        "workload.samples_per_prompt=4",
        "runtime.max_batch=8",
        *warmup_sets(tmp_path),
    ]
    args = ["train", "--preset", "tiny-cpu", "--steps", str(steps), "--no-progress", "--verbose"]
    args += ["--out", str(run), "--fault", "kill-trainer@0"]
    args += [x for kv in sets for x in ("--set", kv)]
    log = tmp_path / "driver.log"
    print(f"the drivers' output: {log}")
    proc = _laminar(args, log)
    try:  # SIGTERM once the checkpoint after the trainer's restart is whole
        deadline = time.monotonic() + 600
        while not (run / "checkpoints" / "step-000001").exists():
            assert proc.poll() is None, "the run ended before it was stopped"
            assert time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    (stopped,) = json.loads((run / "sessions.json").read_text())
    assert stopped["ended"]  # SIGTERM: the session tore itself down (nothing for a resume to reap)
    faults = json.loads((run / "faults.json").read_text())
    (kill,) = [f for f in faults if f["kind"] == "kill-trainer"]
    assert kill["resumed_version"] >= 1 and "checkpoints/step-000000" in kill["checkpoint"]
    done = len(pd.read_csv(run / "steps.csv"))
    assert 2 <= done < steps and not (run / "summary.json").exists()

    resumed = _laminar(["train", "--resume", str(run), "--no-progress", "--verbose"], log)
    try:
        assert resumed.wait(600) == 0
    finally:
        if resumed.poll() is None:
            resumed.kill()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == steps and summary["resumed"]["from_step"] >= 1
    assert summary["trajectories_lost"] == 0 and summary["trajectories_duplicated"] == 0
    assert summary["trajectories_consumed"] == steps * 2 * 4
    rows = pd.read_csv(run / "steps.csv")
    assert list(rows["step"]) == list(range(steps))
    assert list(rows["version"]) == sorted(rows["version"])
    # the checkpoints are whole in the driver's run directory, pruned to keep_checkpoints
    ckpts = sorted(p.name for p in (run / "checkpoints").glob("step-*"))
    assert ckpts == [f"step-{steps - 2:06d}", f"step-{steps - 1:06d}"]
    trainer = run / "checkpoints" / ckpts[-1] / "trainer"
    (version_dir,) = [p for p in trainer.iterdir() if p.name.startswith("v")]
    shards = sorted(p.name for p in version_dir.iterdir())
    assert "__0_0.distcp" in shards and "__1_0.distcp" in shards and ".metadata" in shards
    # nothing of the checkpoints or the model stays on the machines
    for m in apart.nodes.values():
        left = [p for p in m.root.rglob("*") if p.suffix == ".distcp" or p.name == "storage"]
        assert not left, left
    # the final model: a Hugging Face directory on the driver's machine that loads
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(run / "model")
    assert sum(p.numel() for p in model.parameters()) > 0
    assert not [p.name for p in run.iterdir() if p.name.startswith(".model")]
    assert os.path.getsize(run / "model" / "model.safetensors") > 0
    assert Path(run / "model" / "config.json").exists()
