"""``laminar calibrate`` measures how the runs' policy answered the repeat task
(``laminar.calibrate.answers``), the cost file carries it (``laminar.costlengths``), and the
simulator's task lengths follow it (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from laminar.calibrate.answers import MIN_SAMPLES
from laminar.cli import main
from laminar.config import load_config
from laminar.costfile import read_cost_file
from laminar.errors import ConfigError
from laminar.policy.repeatanswers import answer_len
from laminar.sim.local_workload import as_answered, task_workload
from tests.calibrate.test_calibrate_cli import make_run

OLD = Path(__file__).resolve().parents[2] / "docs" / "fidelity" / "cost.json"
CAP = 128  # the tiny-cpu preset's max_response_len


def policy(exact: np.ndarray, rng) -> np.ndarray:
    """A made-up policy: short answers twice as long, long ones (>= 16) half as long, 10%
    of the long ones run to the cap."""
    out = np.where(exact < 16, 2 * exact, exact // 2)
    runaway = (exact >= 16) & (rng.random(len(exact)) < 0.1)
    return np.where(runaway, CAP, np.minimum(out, CAP))


def run_with_policy(root: Path, seed: int) -> Path:
    run = make_run(root, seed=seed)
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(400), 8)
    exact = np.array([answer_len(0, int(p), median_len=6, tail_ratio=10, max_answer_len=CAP - 1)
                      for p in ids]) + 1  # fmt: skip
    trace = pd.DataFrame({"step": ids // 16, "prompt_id": ids,
                          "sample_index": np.tile(np.arange(8), 400), "prompt_len": 5,
                          "response_len": policy(exact, rng), "finish_reason": "stop"})  # fmt: skip
    trace.to_parquet(run / "trajectories.parquet", index=False)
    return run


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("answers")
    runs = [run_with_policy(tmp / "a", 1), run_with_policy(tmp / "b", 2)]
    out = tmp / "cost.json"
    assert main(["calibrate", *map(str, runs), "-o", str(out)]) == 0
    return out


def test_calibrate_recovers_how_the_policy_answered(calibrated):
    answers = read_cost_file(calibrated).policy_lengths
    assert answers["runs"] == 2
    buckets = answers["buckets"]
    assert buckets[0]["answer_min"] == 1 and all(b["samples"] >= MIN_SAMPLES for b in buckets)
    for b in buckets:
        if b["answer_max"] <= 16:  # every answer doubled, none ran away
            assert b["cap_frac"] == 0 and b["ratio_q"][0] == b["ratio_q"][-1] == 2.0
        elif b["answer_min"] >= 16 and b["samples"] >= 100:
            assert 0.03 < b["cap_frac"] < 0.2
            assert b["ratio_q"][-1] <= 0.5 + 1e-9  # halved (rounded down) among the rest


def test_the_cost_file_records_the_task_its_answers_come_from(calibrated):
    tasks = read_cost_file(calibrated).policy_lengths["tasks"]
    assert tasks == [{"median_len": 6.0, "tail_ratio": 10.0, "max_response_len": CAP}]


def test_a_job_with_another_task_is_warned_to_probe_its_lengths(calibrated, tmp_path, capsys):
    """Issue 31: the held-out job (another max_response_len) trained another policy, which ran
    twice as long; drawing its lengths from the calibration runs' answers missed its step time
    by 18-39%. ``simulate --cost`` says so, once, and points to ``--lengths-from``; not for
    the calibration runs' own task, nor for a job that replays a trace."""
    args = ["simulate", "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost",
            str(calibrated)]  # fmt: skip
    assert main([*args, "--set", "workload.max_response_len=256",
                 "--out", str(tmp_path / "a")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("trains another policy") == 1, err
    assert "(median_len 6, tail_ratio 10, max_response_len 128)" in err
    assert "(median_len 6, tail_ratio 10, max_response_len 256)" in err
    assert "--lengths-from" in err
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert "another policy" not in capsys.readouterr().err
    trace = calibrated.parent / "a" / "trajectories.parquet"
    assert main([*args, "--set", "workload.max_response_len=256", "--set",
                 f"workload.source={{type: trace, path: {trace}}}",
                 "--out", str(tmp_path / "c")]) == 0  # fmt: skip
    assert "another policy" not in capsys.readouterr().err


def test_simulated_task_lengths_follow_the_calibrated_policy(calibrated, tmp_path):
    cfg = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={calibrated}",
                                                    "workload.max_response_len=256"])  # fmt: skip
    w = task_workload(cfg)
    exact = np.array([answer_len(0, int(p), median_len=6, tail_ratio=10, max_answer_len=255)
                      for p in w["prompt_id"]]) + 1  # fmt: skip
    short, long = exact < 16, exact >= 32
    assert (w["response_len"][short] == 2 * exact[short]).all()
    runaway = w["response_len"][long] == 256  # to the predicted job's own cap
    assert 0.02 < runaway.mean() < 0.25
    rest = w["response_len"][long][~runaway]
    assert (rest <= exact[long][~runaway] / 2 + 1).all()
    assert (w.loc[w["response_len"] >= 256, "finish_reason"] == "length").all()


def test_task_lengths_without_policy_answer_exactly_the_runtimes_prompts(tmp_path):
    cfg = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={OLD}"])
    w = task_workload(cfg)
    exact = [answer_len(0, int(p), median_len=6, tail_ratio=10, max_answer_len=127)
             for p in w["prompt_id"]]  # fmt: skip
    assert (w["response_len"] == np.array(exact) + 1).all()
    # BOS, the number's digits, "*", the letter, "=": what the runtime's trace records
    assert (w["prompt_len"] == [len(str(n)) + 4 for n in exact]).all()


def test_as_answered_extrapolates_with_the_last_bucket():
    answers = {"runs": 1, "buckets": [
        {"answer_min": 1, "answer_max": 8, "samples": 20, "cap_frac": 0.0, "ratio_q": [1.0]},
        {"answer_min": 8, "answer_max": 16, "samples": 20, "cap_frac": 0.0, "ratio_q": [0.5]},
    ]}  # fmt: skip
    got = as_answered(np.array([3, 10, 100, 1000]), answers, 300, np.random.default_rng(0))
    assert got.tolist() == [3, 5, 50, 300]


BUCKET = {"answer_min": 1, "answer_max": 8, "samples": 20, "cap_frac": 0.1, "ratio_q": [0.5, 1.0]}


@pytest.mark.parametrize(
    ("block", "key", "says"),
    [
        ("all", "policy_lengths", "mapping"),
        ({"runs": 1}, "policy_lengths.buckets", "list"),
        ({"runs": 0, "buckets": [BUCKET]}, "policy_lengths.runs", "out of range"),
        ({"runs": 1, "buckets": [BUCKET], "x": 1}, "policy_lengths.x", "unknown key"),
        (
            {"runs": 1, "buckets": [{**BUCKET, "cap_frac": float("nan")}]},
            "policy_lengths.buckets[0].cap_frac",
            "finite",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "cap_frac": 1.5}]},
            "policy_lengths.buckets[0].cap_frac",
            "out of range",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "samples": -3}]},
            "policy_lengths.buckets[0].samples",
            "out of range",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "answer_max": 1}]},
            "policy_lengths.buckets[0].answer_max",
            "out of range",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "answer_min": 5, "answer_max": 3}]},
            "policy_lengths.buckets[0].answer_max",
            "must exceed",
        ),
        (
            {"runs": 1, "buckets": [BUCKET, {**BUCKET, "answer_min": 9, "answer_max": 20}]},
            "policy_lengths.buckets[1].answer_min",
            "previous bucket",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "ratio_q": [1.0, 0.5]}]},
            "policy_lengths.buckets[0].ratio_q",
            "must not decrease",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "ratio_q": ["1"]}]},
            "policy_lengths.buckets[0].ratio_q[0]",
            "a number",
        ),
        (
            {"runs": 1, "buckets": [{**BUCKET, "ratio_q": [0.0]}]},
            "policy_lengths.buckets[0].ratio_q[0]",
            "out of range",
        ),
        ({"runs": 1, "buckets": [{"answer_min": 1}]}, "policy_lengths.buckets[0]", "exactly"),
        ({"runs": 1, "tasks": [], "buckets": [BUCKET]}, "policy_lengths.tasks", "list"),
        ({"runs": 1, "tasks": [{"median_len": 6}], "buckets": [BUCKET]},
         "policy_lengths.tasks[0]", "exactly"),
        (
            {"runs": 1, "buckets": [BUCKET],
             "tasks": [{"median_len": 6, "tail_ratio": 0.5, "max_response_len": 128}]},
            "policy_lengths.tasks[0].tail_ratio",
            "out of range",
        ),
        (
            {"runs": 1, "buckets": [BUCKET],
             "tasks": [{"median_len": 6, "tail_ratio": 10, "max_response_len": 12.5}]},
            "policy_lengths.tasks[0].max_response_len",
            "whole number",
        ),
    ],
)
def test_hostile_policy_lengths_are_refused_naming_file_and_key(tmp_path, block, key, says):
    data = json.loads(OLD.read_text())
    data["policy_lengths"] = block
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        read_cost_file(path)
    text = str(err.value)
    assert str(path) in text and f"{key}:" in text and says in text


def test_old_cost_file_has_no_policy_lengths():
    assert read_cost_file(OLD).policy_lengths is None


def test_lengths_from_a_probe_of_the_job_replace_the_calibration_runs_answers(calibrated,
                                                                             tmp_path, capsys):
    """``--lengths-from``: a short run of the job to predict (its own policy) supplies the
    task lengths; every time coefficient stays the calibration runs'."""
    probe = run_with_policy(tmp_path / "p", 3)
    trace = pd.read_parquet(probe / "trajectories.parquet")
    trace["response_len"] = np.minimum(3 * trace["response_len"], CAP)  # another policy
    trace.to_parquet(probe / "trajectories.parquet", index=False)
    runs = [str(calibrated.parent / name) for name in ("a", "b")]  # the fixture's
    out = tmp_path / "cost.json"
    capsys.readouterr()
    assert main(["calibrate", *runs, "--lengths-from", str(probe), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "task lengths as the --lengths-from run(s) answered (policy_lengths, 1 run(s)): " \
           "median_len 6, tail_ratio 10, max_response_len 128" in said, said
    mine, theirs = json.loads(out.read_text()), json.loads(calibrated.read_text())
    assert mine["coefficients"] == theirs["coefficients"]
    assert mine["policy_lengths"]["runs"] == 1
    first = mine["policy_lengths"]["buckets"][0]
    assert first["answer_max"] <= 16 and first["ratio_q"][0] == first["ratio_q"][-1] == 6.0
    # a probe with nothing to measure lengths from is refused, nothing written
    bare = tmp_path / "bare.json"
    (probe / "trajectories.parquet").rename(tmp_path / "moved.parquet")
    capsys.readouterr()
    assert main(["calibrate", *runs, "--lengths-from", str(probe), "-o", str(bare)]) != 0
    assert not bare.exists()
    assert str(probe) in capsys.readouterr().err
