"""``benchmarks/bench_runtime.py``'s pure parts (no engine): ``--task`` and its overrides, the
tiny model's calculator (``benchmarks/calculator_tiny.py``) as the warm-up and the turns see
it, the turn figures and the measured-against-simulated table (issue 29, item 5)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from laminar.config import load_config
from laminar.config.runtime import CalculatorTask, PythonTask
from laminar.runtime.models.codec import CharCodec, prompt_tokens
from laminar.runtime.models.localmodel import arithmetic_jsonl
from laminar.runtime.tasks.base import WARMUP_STREAM
from laminar.runtime.tasks.make import make_task

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_runtime_t", BENCH / "bench_runtime.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def clean_path():
    before = list(sys.path)
    yield
    sys.path[:] = before
    sys.modules.pop("calculator_tiny", None)


def _calc_cfg(bench, tmp_path, model="tiny", latency=0.0, extra=()):
    path = arithmetic_jsonl(tmp_path / "p.jsonl", n=64)
    sets = bench.task_overrides("calculator", model_type=model, path=path, latency_s=latency,
                                sigma=0.5)  # fmt: skip
    if model == "pretrained":
        sets.append(f"runtime.model={{type: pretrained, path: {tmp_path}}}")
    return load_config(preset="tiny-cpu", overrides=[*sets, *extra])


def test_defaults_leave_the_bench_as_it_was(bench):
    args = bench.parse_args([])
    assert (args.task, args.out, args.env_latency_s, args.env_latency_sigma) == (
        "preset", None, 1.0, 1.0)  # fmt: skip
    assert bench.task_overrides("preset", model_type="tiny") == []
    args = bench.parse_args(["--task", "calculator", "--env-latency-s", "2.5", "--out", "x"])
    assert (args.task, args.env_latency_s, args.out) == ("calculator", 2.5, "x")


@pytest.mark.parametrize("argv", [["--task", "nope"], ["--env-latency-s", "-1"],
                                  ["--env-latency-sigma", "nan"], ["--problems", "0"],
                                  ["--cost", __file__],
                                  ["--out", "x", "--cost", "/no/such"]])  # fmt: skip
def test_bad_arguments_are_refused(bench, argv, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2


def test_a_used_out_dir_is_refused(bench, tmp_path):
    (tmp_path / "laminar").mkdir()
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", str(tmp_path)])
    bench.parse_args(["--out", str(tmp_path / "new")])


def test_task_overrides_make_each_task(bench, tmp_path, clean_path):
    cfg = _calc_cfg(bench, tmp_path, latency=1.5)
    task = cfg.runtime.task
    assert isinstance(task, PythonTask) and task.entry == "calculator_tiny:make"
    assert Path(task.module_dir) == BENCH and task.max_turns == 4
    assert task.args["latency_median_s"] == 1.5 and task.args["latency_sigma"] == 0.5
    assert task.args["system_prompt"] == "" and task.timeout_s > task.args["latency_max_s"]
    shipped = _calc_cfg(bench, tmp_path, model="pretrained", latency=1.5).runtime.task
    assert isinstance(shipped, CalculatorTask)
    assert (shipped.latency_median_s, shipped.latency_sigma, shipped.max_turns) == (1.5, 0.5, 4)
    with pytest.raises(ValueError, match="pretrained"):
        bench.task_overrides("jsonl", model_type="tiny", path=tmp_path / "p.jsonl")
    sets = bench.task_overrides("jsonl", model_type="pretrained", path=tmp_path / "p.jsonl")
    assert load_config(preset="tiny-cpu", overrides=sets).runtime.task.type == "jsonl"
    sets = bench.task_overrides("repeat", model_type="tiny")
    assert load_config(preset="tiny-cpu", overrides=sets).runtime.task.type == "repeat"


def test_the_tiny_calculator_warms_up_to_call_it_in_its_vocabulary(bench, tmp_path, clean_path):
    cfg = _calc_cfg(bench, tmp_path)
    gen = make_task(cfg.runtime.task, seed=0, max_answer_len=127)
    codec = CharCodec()
    calls = 0
    for i in range(200):  # what warmup.sft does with each warm-up prompt
        p = gen.prompt(i, stream=WARMUP_STREAM)
        assert 0 < len(prompt_tokens(codec, p, cfg.workload.max_prompt_len)) <= 16
        target = gen.target(p)
        codec.encode(target)  # every character in the tiny vocabulary (raises otherwise)
        if target.startswith("calc:"):
            calls += 1
            a, b = target[5:].split("+")
            assert int(a) + int(b) == int(p.sample["answer"])
        else:
            assert target == p.sample["answer"]
    assert 70 < calls < 130  # call_share 0.5, drawn per prompt index


def test_the_tiny_calculator_answers_a_call_and_ends_without_one(bench, tmp_path, clean_path):
    cfg = _calc_cfg(bench, tmp_path)
    gen = make_task(cfg.runtime.task, seed=0, max_answer_len=127)
    assert gen.max_turns == 4  # a multi-turn environment: it has ``step``
    p = gen.prompt(3)
    user = {"role": "user", "content": p.text}
    msg = asyncio.run(gen.env.step(p.sample, [user, {"role": "assistant", "content": "calc:13+4"}]))
    assert msg == {"role": "tool", "name": "calculator", "content": "17"}
    bad = {"role": "assistant", "content": "x calc: 1+"}
    assert asyncio.run(gen.env.step(p.sample, [user, bad]))["content"].startswith("error:")
    answer = {"role": "assistant", "content": "17"}
    assert asyncio.run(gen.env.step(p.sample, [user, answer])) is None
    right = {"role": "assistant", "content": p.sample["answer"]}
    assert gen.env.reward(p.sample, [user, bad, msg, right]) == 1.0


def test_the_latency_is_the_shipped_calculators(bench, tmp_path, clean_path):
    cfg = _calc_cfg(bench, tmp_path, latency=1.0)
    gen = make_task(cfg.runtime.task, seed=0, max_answer_len=127)
    from laminar.runtime.tasks.calculator import Calculator

    shipped = Calculator(cfg.runtime.task.args, 0)
    sample = gen.prompt(5).sample
    assert gen.env.latency_s(sample, 1) == shipped.latency_s(sample, 1) > 0


def test_turn_stats(bench):
    def row(turns, latency=0.0):
        return {"traj": SimpleNamespace(turns=turns, tool_latency_s=latency)}

    assert bench.turn_stats([row(0), row(0)]) == {}  # a single-turn task
    stats = bench.turn_stats([row(1), row(2, 1.0), row(3, 2.0), row(1)])
    assert stats == {"turns_gt1_share": 0.5, "turns_mean": 1.75, "tool_latency_mean_s": 1.5}


def test_sim_table(bench):
    rows = [
        {"mode": "laminar", "repeat": "rep0", "measured": 300.0, "simulated": 400.0},
        {"mode": "sync", "repeat": "rep0", "measured": 100.0, "simulated": 200.0},
        {"mode": "laminar", "repeat": "rep1", "measured": 500.0, "simulated": 400.0},
        {"mode": "sync", "repeat": "rep1", "measured": 250.0, "simulated": 200.0},
    ]
    figures, text = bench.sim_table(rows)
    assert figures["laminar"] == {"measured": 400.0, "simulated": 400.0}
    assert figures["sync"] == {"measured": 175.0, "simulated": 200.0}
    ratio = figures["laminar_over_sync"]
    assert ratio["measured_per_repeat"] == [3.0, 2.0] and ratio["measured"] == 2.5
    assert ratio["simulated"] == 2.0
    lines = text.splitlines()
    assert lines[-1].split() == ["laminar", "/", "sync", "2.50x", "2.00x", "0.80x"]
    assert lines[2].split() == ["sync", "175", "200", "1.14x"]
    assert bench.sim_table(rows[:1])[0].keys() == {"laminar"}  # no sync run: no ratio
