"""The machine-speed probe (``laminar/runtime/profiling/speedprobe.py``) and what calibration does
with it (``laminar/calibrate/speed.py``): a run's speed over its window, the calibration's
reference, and a cost file moved to another measured speed."""

from __future__ import annotations

import json
import math
import time

import pandas as pd
import pytest

from laminar.calibrate import calibrate, read_run
from laminar.calibrate.speed import at_speed, run_speed
from laminar.cli import main
from laminar.errors import LaminarError
from laminar.runtime.profiling.speedprobe import SpeedProbe
from tests.calibrate.test_calibrate_cli import make_run


def _probe(run, matmul, python, setup_s=2.0, first_step_s=3.0):
    """Give ``run`` a probe: slow samples during setup and the first step, then steady ones."""
    (run / "summary.json").write_text(json.dumps({"steps": 8, "setup_s": setup_s}))
    steps = {"step": range(4), "wait_s": [first_step_s - 1, 0.5, 0.5, 0.5], "train_s": 1.0,
             "publish_s": 0.0}  # fmt: skip
    pd.DataFrame(steps).to_csv(run / "steps.csv", index=False)
    at = [0.5 + i for i in range(12)]
    warm = setup_s + first_step_s
    rows = {"at_s": at, "matmul_s": [matmul * (5 if t < warm else 1) for t in at],
            "python_s": [python * (5 if t < warm else 1) for t in at], "niceness": -20}  # fmt: skip
    pd.DataFrame(rows).to_csv(run / "profile" / "speed_probe.csv", index=False)
    return run


def test_run_speed_is_the_window_median_and_the_reference_their_geometric_mean(tmp_path):
    a = _probe(make_run(tmp_path / "a", seed=1), 0.004, 0.001)
    b = _probe(make_run(tmp_path / "b", seed=2, shared=False, threads=2, rate=3e10), 0.016, 0.004)
    s = run_speed(read_run(a))
    # the warm-up's five-times-slower samples are outside the window
    assert s["matmul_s"] == pytest.approx(0.004) and s["python_s"] == pytest.approx(0.001)
    assert s["speed_s"] == pytest.approx(0.002) and s["samples"] == 7
    content, _ = calibrate([a, b])
    ref = content["runtime"]["speed_reference"]
    assert ref["runs"] == 2 and ref["speed_s"] == pytest.approx(math.sqrt(0.002 * 0.008))


def test_at_speed_scales_seconds_with_the_speed_and_rates_against_it(tmp_path):
    a = _probe(make_run(tmp_path / "a", seed=1), 0.004, 0.001)
    content, _ = calibrate([a])
    slow = {"matmul_s": 0.008, "python_s": 0.003, "speed_s": math.sqrt(0.008 * 0.003)}
    k = slow["speed_s"] / 0.002
    # an eager engine's host-launch floor is host time too
    content["coefficients"]["decode_min_step_s"] = {"value": 0.01, "unit": "s", "source": "t"}
    moved = at_speed(content, slow)
    c0, c1 = content["coefficients"], moved["coefficients"]
    for name in ("decode_base_s", "decode_per_seq_s", "prefill_per_token_s", "decode_min_step_s"):
        assert c1[name]["value"] == pytest.approx(c0[name]["value"] * k), name
    for name in ("train_flop_per_s_per_gpu", "pcie_bytes_per_s", "rdma_bytes_per_s"):
        assert c1[name]["value"] == pytest.approx(c0[name]["value"] / k), name
    for name in ("weight_bytes", "kv_capacity_tokens", "train_flop_per_token"):
        assert c1[name]["value"] == c0[name]["value"], name
    r0, r1 = content["runtime"], moved["runtime"]
    for t, v in r0["trainer_flop_per_s_by_threads"].items():
        assert r1["trainer_flop_per_s_by_threads"][t] == pytest.approx(v / k)
        assert r1["trainer_step_base_s_by_threads"][t] == pytest.approx(
            r0["trainer_step_base_s_by_threads"][t] * k)  # fmt: skip
    assert r1["refill_latency_s"] == pytest.approx(r0["refill_latency_s"] * k)
    assert r1["core_sharing_alpha"] == r0["core_sharing_alpha"]  # a share, not a time
    assert r1["engine_spin_s"] == r0["engine_spin_s"]  # a setting
    assert r1["speed_scaled_by"] == pytest.approx(k)
    # by one figure alone: the matmul probe doubled
    assert at_speed(content, slow, "matmul_s")["runtime"]["speed_scaled_by"] == pytest.approx(2)
    # moving back to the reference is the identity
    back = at_speed(moved, {**r0["speed_reference"]})
    assert back["coefficients"]["decode_base_s"]["value"] == pytest.approx(
        c0["decode_base_s"]["value"])  # fmt: skip


def test_a_run_without_probe_has_no_reference_and_cannot_be_moved(tmp_path, capsys):
    plain = make_run(tmp_path / "plain", seed=1)
    content, _ = calibrate([plain])
    assert "speed_reference" not in content["runtime"]
    assert run_speed(read_run(plain)) is None
    with pytest.raises(LaminarError, match="speed_reference"):
        at_speed(content, {"speed_s": 1.0, "matmul_s": 1.0, "python_s": 1.0})
    out = tmp_path / "cost.json"
    rc = main(["calibrate", str(plain), "-o", str(out), "--at-speed-of", str(plain)])
    err = capsys.readouterr().err
    assert rc != 0 and "speed_probe.csv" in err and not out.exists()


def test_a_bad_probe_row_is_named(tmp_path, capsys):
    run = _probe(make_run(tmp_path / "a", seed=1), 0.004, 0.001)
    path = run / "profile" / "speed_probe.csv"
    df = pd.read_csv(path)
    df.loc[4, "python_s"] = 0.0
    df.to_csv(path, index=False)
    rc = main(["calibrate", str(run), "-o", str(tmp_path / "cost.json")])
    err = capsys.readouterr().err
    assert rc != 0 and "speed_probe.csv" in err and "python_s" in err and "5" in err


def test_the_probe_samples_beside_the_caller_and_stops(tmp_path):
    t0 = time.time()
    probe = SpeedProbe(0.2, tmp_path / "scratch").start()
    assert probe.path.parent == tmp_path / "scratch"  # the run's scratch dir, not /tmp
    deadline = time.time() + 120  # the child imports torch (slow on a loaded machine), then
    while time.time() < deadline:  # samples every 0.2 s
        if len(probe.path.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    rows = probe.stop(t0)
    assert probe.proc is None and not any((tmp_path / "scratch").iterdir())
    assert len(rows) >= 3, rows
    assert (rows["matmul_s"] > 0).all() and (rows["python_s"] > 0).all()
    assert rows["at_s"].is_monotonic_increasing and (rows["at_s"] > 0).all()
    assert SpeedProbe(0).start().stop(t0).empty  # 0: no probe


def test_calibration_times_each_run_at_the_runs_mean_speed(tmp_path):
    """Two runs of one job, the second on a machine twice as slow (its probe says so, and its
    engine and trainer took twice as long): each run's seconds are divided by its speed over
    the reference, so the fit sees one machine, and moved back to either run's speed it gives
    that run's own figures."""
    from tests.calibrate.test_calibrate_cli import RATE, TRUE

    a = _probe(make_run(tmp_path / "a", seed=1), 0.004, 0.001)
    b = make_run(tmp_path / "b", seed=2, shared=False, threads=2, rate=3e10)
    b = _probe(b, 0.008, 0.002)
    prof = b / "profile"
    eng = pd.read_csv(prof / "engine_steps.csv")
    eng[["at_s", "step_s"]] *= 2.0  # the same steps, each twice as long
    eng.to_csv(prof / "engine_steps.csv", index=False)
    tr = pd.read_csv(prof / "trainer_steps.csv")
    tr["train_s"] *= 2.0
    tr.to_csv(prof / "trainer_steps.csv", index=False)
    content, fits = calibrate([a, b])
    assert "at their mean machine speed" in content["coefficients"]["decode_base_s"]["source"]
    engine = next(f for f in fits if f.name == "engine step")
    assert engine.r2 > 0.95  # without the speeds the two runs disagree by 2x
    for run, k, threads, rate in ((a, 1.0, "1", RATE), (b, 2.0, "2", 3e10 / 2)):
        here = at_speed(content, run_speed(read_run(run)))
        for name in ("decode_base_s", "decode_per_seq_s"):
            assert here["coefficients"][name]["value"] == pytest.approx(k * TRUE[name], rel=0.1)
        fitted = here["runtime"]["trainer_flop_per_s_by_threads"][threads]
        assert fitted == pytest.approx(rate, rel=1e-3)
