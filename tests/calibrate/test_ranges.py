"""``laminar calibrate`` records the ranges of batch, KV tokens and lengths its fit saw, and
``laminar simulate --cost`` warns when a prediction leaves them (issue 31, item 2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from laminar.calibrate.ranges import micro_batch_tokens, outside, predicted_ranges
from laminar.cli import main
from laminar.costfile import read_cost_file
from tests.calibrate.test_calibrate_cli import make_run


def _with_trace(root, seed: int, longest: int):
    """A synthetic run directory (``make_run``) with a trace of 10 steps x 16 trajectories."""
    run = make_run(root, seed=seed)
    rng = np.random.default_rng(seed)
    n = 160
    response = rng.integers(1, longest + 1, n)
    response[0] = longest
    pd.DataFrame({"step": np.repeat(np.arange(10), 16), "prompt_id": np.repeat(np.arange(40), 4),
                  "sample_index": np.tile(np.arange(4), 40), "prompt_len": 5,
                  "response_len": response, "finish_reason": "stop"}).to_parquet(
        run / "trajectories.parquet", index=False)  # fmt: skip
    return run


def test_calibrate_writes_and_prints_the_ranges_its_runs_saw(tmp_path, capsys):
    runs = [_with_trace(tmp_path / "a", 1, 40), _with_trace(tmp_path / "b", 2, 90)]
    out = tmp_path / "cost.json"
    assert main(["calibrate", *map(str, runs), "-o", str(out)]) == 0
    assert "calibrated ranges" in capsys.readouterr().out
    ranges = read_cost_file(out).ranges
    eng = pd.concat([pd.read_csv(r / "profile" / "engine_steps.csv") for r in runs])
    traj = pd.concat([pd.read_parquet(r / "trajectories.parquet") for r in runs])
    assert ranges["batch_seqs"]["min"] == eng["decode_seqs"].min()
    assert ranges["batch_seqs"]["max"] == eng["decode_seqs"].max()
    assert ranges["kv_tokens"]["max"] == eng["kv_tokens"].max()
    assert ranges["response_len"]["max"] == 90 and ranges["response_len"]["min"] == 1
    assert ranges["response_len"]["p50"] == pytest.approx(traj["response_len"].median())
    limit = 4096  # the tiny-cpu preset's runtime.grpo.micro_batch_tokens
    lengths = [(g + 5).tolist() for r in runs
               for _, g in pd.read_parquet(r / "trajectories.parquet").groupby("step")[
                   "response_len"]]  # fmt: skip
    assert ranges["micro_batch_tokens"]["max"] == max(micro_batch_tokens(lengths, limit))
    assert json.loads(out.read_text())["ranges"]["kv_tokens"]["unit"] == "tokens"


def test_micro_batch_tokens_pad_to_the_longest():
    # sorted 2, 3, 10, 50: 2, 3, 10 fit 40 padded tokens (3 x 10); 50 goes alone
    assert micro_batch_tokens([[10, 2, 50, 3]], 40) == [30, 50]


def _tables(batches, kv, responses):
    replicas = pd.DataFrame({"running": batches, "kv_tokens": kv})
    traj = pd.DataFrame({"system": "laminar", "step": np.arange(len(responses)) // 4,
                         "prompt_len": 5, "response_len": responses,
                         "consumed_version": 0})  # fmt: skip
    return replicas, traj


CAL = {"batch_seqs": {"min": 1, "p50": 20, "p99": 60, "max": 64, "unit": "sequences"},
       "kv_tokens": {"min": 10, "p50": 400, "p99": 2000, "max": 3000, "unit": "tokens"},
       "response_len": {"min": 1, "p50": 7, "p99": 60, "max": 128, "unit": "tokens"}}  # fmt: skip


def test_no_warning_inside_the_calibrated_ranges():
    needs = predicted_ranges(*_tables([1, 30, 64], [10, 900, 3000], [1, 5, 60, 128]), 4096)
    assert outside(CAL, needs) == []


def test_warns_once_per_quantity_left():
    needs = predicted_ranges(*_tables([1, 30, 64], [10, 900, 5200], [1, 9, 180, 255]), 4096)
    lines = outside(CAL, needs)
    assert len(lines) == 2
    kv, resp = lines
    assert "kv_tokens" in kv and "calibrated 10..3,000" in kv and "needs 10..5,200" in kv
    assert "response_len" in resp and "1..128" in resp and "1..255" in resp


def test_no_warning_within_one_percent_of_an_edge():
    needs = predicted_ranges(*_tables([1, 64], [10, 3020], [1, 128]), 4096)
    assert outside(CAL, needs) == []
    needs = predicted_ranges(*_tables([1, 64], [10, 3040], [1, 128]), 4096)
    assert len(outside(CAL, needs)) == 1


def test_warns_below_the_smallest_seen():
    needs = predicted_ranges(*_tables([1, 2], [2, 30], [1, 2, 3, 4]), 4096)
    (line,) = outside(CAL, needs)
    assert "kv_tokens" in line and "needs 2..30" in line


def test_simulate_cost_warns_on_stderr(tmp_path, capsys):
    """End to end: a cost file whose ranges are too narrow for the tiny-cpu job warns; one
    without ranges (every older file) does not."""
    from pathlib import Path

    old = Path(__file__).resolve().parents[2] / "docs" / "fidelity" / "cost.json"
    narrow = json.loads(old.read_text())
    narrow["ranges"] = {"response_len": {"min": 1, "max": 2, "unit": "tokens"}}
    cost = tmp_path / "narrow.json"
    cost.write_text(json.dumps(narrow))
    args = ["simulate", "--preset", "tiny-cpu", "--set", "workload.steps=3"]
    assert main([*args, "--cost", str(cost), "--out", str(tmp_path / "s1")]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: the prediction leaves the calibrated range") == 1
    assert "response_len" in err
    assert main([*args, "--cost", str(old), "--out", str(tmp_path / "s2")]) == 0
    assert "calibrated range" not in capsys.readouterr().err
