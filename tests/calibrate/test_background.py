"""Where the job's cores went (``laminar/runtime/profiling/corecpu.py``) and what other processes
took of an engine's cores (``laminar/calibrate/background.py``): docs/fidelity.md, *Issue 31*."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from laminar.calibrate import background
from laminar.calibrate.rundir import RunDirError, read_run
from laminar.cli import main
from laminar.config import load_config
from laminar.runfiles.profile import CORE_CPU_KINDS, read_core_cpu
from laminar.runtime.profiling.corecpu import UNPINNED_CORE, CoreCpu
from tests.calibrate.test_calibrate_cli import make_run

LINUX_2 = pytest.mark.skipif(
    not Path("/proc/stat").exists() or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux's /proc and two cores",
)
BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


@LINUX_2
def test_core_cpu_tells_pinned_unpinned_and_the_trainers_ranks_apart(tmp_path):
    """Three busy children of this process, sampled while they run: one pinned to a core and
    titled as vLLM titles its workers, one unpinned, one whose title is a trainer rank's (Ray's
    ``ray::TrainerRank...``) over every core: the first counts as pinned on its core and as the
    engine's, the second as unpinned, the third as pinned, split evenly (three on two cores:
    each gets about two thirds of one)."""
    cores = sorted(os.sched_getaffinity(0))[:2]
    sampler = CoreCpu(os.getpid(), tuple(cores))
    code = BUSY.format(s=2.0)
    pinned = subprocess.Popen(["bash", "-c", f'exec -a VLLM::Worker {sys.executable} '
                                             f'-c "{code}"'])  # fmt: skip
    os.sched_setaffinity(pinned.pid, {cores[0]})
    loose = subprocess.Popen([sys.executable, "-c", code])
    os.sched_setaffinity(loose.pid, set(cores))
    trainer = subprocess.Popen(["bash", "-c", f'exec -a ray::TrainerRank.step {sys.executable} '
                                              f'-c "{code}"'])  # fmt: skip
    os.sched_setaffinity(trainer.pid, set(cores))
    time.sleep(0.3)
    assert sampler.sample() == []  # the baseline
    time.sleep(1.2)
    rows = pd.DataFrame(sampler.sample(), columns=["core", "what", "cpu_s"])
    for p in (pinned, loose, trainer):
        p.wait()
    got = rows.set_index(["core", "what"])["cpu_s"]
    # core 0: the pinned child and half the trainer; core 1: the other half
    assert got[(cores[0], "pinned")] > got[(cores[1], "pinned")] + 0.3
    assert 0.15 < got[(cores[1], "pinned")] < 0.8
    assert 0.4 < got[(UNPINNED_CORE, "unpinned")] < 1.3  # the loose child
    assert got[(cores[0], "busy")] > 0.8 and got[(cores[1], "busy")] > 0.8
    # vLLM's share: the pinned child's, on its core alone
    assert got[(cores[0], "engine")] == pytest.approx(
        got[(cores[0], "pinned")] - got[(cores[1], "pinned")], abs=0.1)
    assert got[(cores[1], "engine")] == 0


def _sync_run(spin_s: float, free: float, held: float, seed: int = 0) -> SimpleNamespace:
    """Two engines on cores 0 and 1: r0 steps all 8 s, r1 only the first 3 s. Each core loses
    ``held`` of itself to other processes while the other engine holds its core (stepping,
    then spinning for ``spin_s``), ``free`` after."""
    rng = np.random.default_rng(seed)
    rows = []
    for rid, until in (("r0", 8.0), ("r1", 3.0)):
        t = 0.0
        while t < until:
            step = 0.004 * rng.uniform(0.9, 1.1)
            t += step
            rows.append((rid, t, step, 8, 0, 0, 40, 0.01, 8, 0))
    cols = ["replica_id", "at_s", "step_s", "decode_seqs", "prefill_seqs", "prefill_tokens",
            "kv_tokens", "kv_usage", "running", "waiting"]  # fmt: skip
    ticks = np.arange(0.0, 8.01, 0.25)
    core_rows = []
    for a, b in itertools.pairwise(ticks):
        other = held if b <= 3.0 + spin_s else free
        dt = b - a
        core_rows += [(b, 0, "busy", dt), (b, 0, "pinned", dt * (1 - other)),
                      (b, 0, "engine", dt * (0.95 - other)),
                      (b, 1, "busy", dt), (b, 1, "pinned", dt * (1 - held)),
                      (b, 1, "engine", dt * (0.95 - held)), (b, -1, "unpinned", 0.1)]
    cfg = load_config(preset="tiny-cpu",
                      overrides=["runtime.mode=sync", f"runtime.engine_spin_s={spin_s}"])
    return SimpleNamespace(
        engine=pd.DataFrame(rows, columns=cols), config=cfg, summary={},
        machine={"mode": "sync", "rollout_cpus": [[0], [1]], "trainer_cpus": [0, 1]},
        cores=pd.DataFrame(core_rows, columns=["at_s", "core", "what", "cpu_s"]),
        path=Path("/nonexistent"),
    )  # fmt: skip


def test_background_is_read_by_what_the_other_cores_did():
    """While the other engine holds its core (stepping or spinning after) core 0 loses 0.12 to
    other processes, 0.02 once it is free: the measurement finds both and the factor they
    imply, (1 - 0.02) / (1 - 0.12) - 1; with the spin left out of the other engine's hold the
    spinning second would count as free and blur the figures."""
    m = background.measure([_sync_run(1.0, free=0.02, held=0.12)])
    assert m.share["engine"] == pytest.approx(0.12, abs=0.005)
    assert m.share["free"] == pytest.approx(0.02, abs=0.005)
    assert m.gamma() == pytest.approx(0.98 / 0.88 - 1, abs=0.01)
    assert m.ticks["engine"] >= 10 and m.ticks["free"] >= 10 and m.runs == 1
    assert m.front == pytest.approx(0.05, abs=0.005)  # pinned, not vLLM's: the front end
    n_held, n_free = m.ticks["engine"], m.ticks["free"]
    assert m.vllm == pytest.approx(0.95 - (0.12 * n_held + 0.02 * n_free) / (n_held + n_free),
                                   abs=0.005)  # fmt: skip
    fit = m.fit()
    assert fit.name == "cores' CPU" and "1.11x" in fit.note
    # only r0 is read while it steps alone on its core; r1 holds core 1 until 4 s
    frame = background.tick_frame(_sync_run(1.0, free=0.02, held=0.12))
    assert set(frame["replica_id"]) == {"r0", "r1"}
    r0 = frame[frame["replica_id"] == "r0"]
    assert (r0["held"].to_numpy()[:14] > 0.99).all() and (r0["held"].to_numpy()[17:] == 0).all()


def test_no_core_rows_or_no_engine_alone_measure_nothing():
    run = _sync_run(1.0, free=0.02, held=0.12)
    assert background.measure([SimpleNamespace(**{**vars(run), "cores": None})]) is None
    shared = SimpleNamespace(**{**vars(run), "machine": {**run.machine,
                                                         "rollout_cpus": [[1], [1]]}})
    assert background.measure([shared]) is None
    together = background.tick_frame(shared)  # both engines on core 1: one row a tick
    assert set(together["replica_id"]) == {"r0+r1"} and (together["engines"] == 2).all()
    assert background.measure([shared], mates=True).runs == 1
    only_engines = background.measure([_sync_run(8.0, free=0.02, held=0.12)])
    assert only_engines.gamma() is None and "free" not in only_engines.share


def test_a_bad_core_row_is_named(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    path = run / "profile" / "core_cpu.csv"
    path.write_text("at_s,core,what,cpu_s\n1.0,0,busy,0.9\n1.0,0,idle,0.1\n")
    with pytest.raises(RunDirError, match=r"core_cpu.csv, row 2, column 'what': expected one of "
                                          r"busy, pinned, engine, unpinned, got 'idle'"):
        read_core_cpu(path)
    path.write_text("at_s,core,what,cpu_s\n1.0,0,busy,0.9\n1.0,0,,0.1\n")
    with pytest.raises(RunDirError, match=r"row 2, column 'what': expected a label"):
        read_core_cpu(path)
    path.write_text("at_s,core,what,cpu_s\n1.0,0,busy,-0.5\n")
    rc = main(["calibrate", str(run), "-o", str(tmp_path / "cost.json")])
    err = capsys.readouterr().err
    assert rc != 0 and "core_cpu.csv" in err and "cpu_s" in err
    assert not (tmp_path / "cost.json").exists()
    path.write_text("at_s,core,what,cpu_s\n1.0,-2,busy,0.5\n")
    with pytest.raises(RunDirError, match="core"):
        read_run(run)
    # an engine step with no replica id (the hostile suite's find): refused by name
    path.unlink()
    steps = run / "profile" / "engine_steps.csv"
    lines = steps.read_text().splitlines()
    lines[1] = "nan" + lines[1][lines[1].index(","):]
    steps.write_text("\n".join(lines) + "\n")
    rc = main(["calibrate", str(run), "-o", str(tmp_path / "cost.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "engine_steps.csv, row 1, column 'replica_id'" in err


def test_calibrate_records_the_measurement_and_simulate_holds_the_fit_against_it(
        tmp_path, capsys):  # fmt: skip
    """A run with core rows: ``laminar calibrate`` prints the measured row and records the
    factor; ``simulate --cost`` warns when the fitted factor is off what it gives."""
    run = make_run(tmp_path / "run", shared=False, threads=2)
    ticks = np.arange(0.25, 6.0, 0.25)
    rows = [(t, c, what, v) for t in ticks for c, what, v in
            ((0, "busy", 0.25), (0, "pinned", 0.2), (1, "busy", 0.25), (1, "pinned", 0.2),
             (-1, "unpinned", 0.1))]  # fmt: skip
    pd.DataFrame(rows, columns=["at_s", "core", "what", "cpu_s"]).to_csv(
        run / "profile" / "core_cpu.csv", index=False)
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(run), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cores' CPU" in printed and "engine 0.200" in printed
    cost = json.loads(out.read_text())
    assert cost["fit"]["cores' CPU"]["values"]["background_engine"] == pytest.approx(0.2)
    assert "cross_core_gamma_measured" not in cost["runtime"]  # no tick with free cores
    cost["runtime"]["cross_core_gamma"] = 0.3
    cost["runtime"]["cross_core_gamma_measured"] = 0.1
    out.write_text(json.dumps(cost))
    args = ["simulate", "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost", str(out),
            "--set", "runtime.mode=sync", "--out", str(tmp_path / "sim")]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "cores' CPU accounting gives (0.10)" in err and "up to 18%" in err


@LINUX_2
def test_the_probe_records_the_cores_the_job_pins_beside_its_speed_rows(tmp_path):
    """The probe's child samples its parent's processes: a busy child pinned to one core gives
    that core's rows (and no other core's); without ``cores`` (off CPU placements) no rows."""
    from laminar.runtime.profiling.speedprobe import SpeedProbe

    core = sorted(os.sched_getaffinity(0))[0]
    busy = subprocess.Popen([sys.executable, "-c", BUSY.format(s=60.0)])
    os.sched_setaffinity(busy.pid, {core})
    try:
        t0 = time.time()
        probe = SpeedProbe(0.2, tmp_path).start()
        plain = SpeedProbe(0.2, tmp_path, cores=False).start()
        deadline = time.time() + 120  # the children import torch first
        while time.time() < deadline and len(probe.path.read_text().splitlines()) < 3:
            time.sleep(0.2)
        probe.stop(t0)
        assert plain.stop(t0) is not None and plain.cores.empty
    finally:
        busy.kill()
        busy.wait()
    cores = probe.cores
    assert set(cores["what"]) == set(CORE_CPU_KINDS)  # what the reader accepts, all of it
    assert set(cores.loc[cores["what"] != "unpinned", "core"]) == {core}
    assert (cores["cpu_s"] >= 0).all() and (cores["at_s"] > 0).all()
    assert set(cores.loc[cores["what"] == "unpinned", "core"]) == {UNPINNED_CORE}
    pinned = cores[cores["what"] == "pinned"]["cpu_s"]
    assert pinned.sum() > 0.5 * (cores["at_s"].max() - cores["at_s"].min())  # the busy child
