"""The shipped environments (issue 29, item 3): ``calculator`` (math problems with a calculator
tool, safe evaluation, a log-normal latency) and ``reasoning_gym`` (reasoning-gym's generators and
scorers, offline); both as ``runtime.task`` types and as environments of the protocol; a chat
template's rendering of an environment's message between turns."""

from __future__ import annotations

import asyncio
import math
import socket
import statistics
import time

import pytest

from laminar.config import load_config
from laminar.config.runtime import CalculatorTask, PythonTask, ReasoningGymTask
from laminar.errors import ConfigError
from laminar.runtime.tasks.calculator import Calculator, calculate, find_call
from laminar.runtime.tasks.make import env_task, make_task
from laminar.runtime.tasks.python import PythonTaskGen
from laminar.runtime.tasks.safe_eval import CalcError, evaluate


@pytest.fixture
def problems(tmp_path):
    f = tmp_path / "problems.jsonl"
    f.write_text('{"prompt": "What is 17 * 23?", "answer": 391}\n'
                 '{"prompt": "What is 2 to the 10th?", "answer": "1024"}\n')  # fmt: skip
    return f


@pytest.mark.parametrize(
    "expression, value",
    [("2 + 3 * 4", "14"), ("7/2", "3.5"), ("2^10", "1024"), ("sqrt(16)", "4"),
     ("-3 % 5", "2"), ("factorial(5)", "120"), ("max(1, 2, 3)", "3"), ("17 × 23", "391"),
     ("(1 + 2) * (3 + 4)", "21"), ("10 // 3", "3"), ("2 ** -1", "0.5")],
)  # fmt: skip
def test_the_calculator_evaluates_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression, why",
    [("__import__('os').system('true')", "not allowed"), ("__import__('os')", "unknown function"),
     ("().__class__", "Attribute"),
     ("open('/etc/passwd')", "unknown function"), ("x", "Name"), ("lambda: 1", "Lambda"),
     ("[1] * 10**9", "List"), ("'a' * 3", "Constant"), ("9 ** 9 ** 9", "too large"),
     ("10 ** 100000", "too large"), ("1 / 0", "division by zero"), ("factorial(10**6)", "0..300"),
     ("1e308 * 10", "finite"), ("(-8) ** 0.5", "complex"), ("1 +", "not an expression"),
     ("1" * 300, "longer than"), ("1+" * 120 + "1", "too long"), ("", "empty")],
)  # fmt: skip
def test_the_calculator_refuses_what_is_not_arithmetic_quickly(expression, why):
    t = time.perf_counter()
    with pytest.raises(CalcError, match=why):
        evaluate(expression)
    assert time.perf_counter() - t < 0.5
    assert calculate(expression).startswith("error: ")


def test_tool_calls_in_every_form():
    assert find_call("let me see <tool>17*23</tool>") == (11, "17*23")
    assert find_call("<tool>1+1</tool> and <tool>2+2</tool>")[1] == "2+2"  # the last call
    qwen = ('so <tool_call>\n{"name": "calculator", "arguments": {"expression": "2**10"}}\n'
            "</tool_call>")
    assert find_call(qwen)[1] == "2**10"
    llama = '{"name": "calculator", "parameters": {"expression": "3*3"}}'
    assert find_call(llama)[1] == "3*3"
    stringly = ('<tool_call>{"name": "calculator", "arguments": '
                '"{\\"expression\\": \\"4/2\\"}"}</tool_call>')
    assert find_call(stringly)[1] == "4/2"
    assert find_call('<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>') is None
    assert find_call("no call here, \\boxed{3}") is None


def test_the_calculator_environment(problems):
    env = Calculator({"path": str(problems)}, seed=0)
    rows = {env.prompt(i)["answer"]: env.prompt(i) for i in range(2)}
    s = rows["391"]
    assert s["messages"][0]["role"] == "system" and "<tool>" in s["messages"][0]["content"]
    assert s["messages"][-1] == {"role": "user", "content": "What is 17 * 23?"}
    assert env.target(s) == "\\boxed{391}"
    conv = [*s["messages"], {"role": "assistant", "content": "I will compute <tool>17*23</tool>"}]
    message = asyncio.run(env.step(s, conv))
    assert message == {"role": "tool", "name": "calculator", "content": "391"}
    bad = [*s["messages"], {"role": "assistant", "content": "<tool>import os</tool>"}]
    assert asyncio.run(env.step(s, bad))["content"].startswith("error: not an expression")
    done = [*conv, message, {"role": "assistant", "content": "So \\boxed{391}."}]
    assert asyncio.run(env.step(s, done)) is None  # no call: the conversation is over
    after = [*s["messages"], {"role": "assistant", "content": "<tool>1+1</tool> \\boxed{391}"}]
    assert asyncio.run(env.step(s, after)) is None  # the answer came after the call
    assert env.reward(s, done) == 1.0 and env.reward(s, conv) == 0.0
    assert Calculator({"path": str(problems), "system_prompt": ""}, 0).prompt(0)["messages"][0][
        "role"] == "user"  # fmt: skip


def test_the_calculator_latency_is_log_normal_and_seeded(problems):
    env = Calculator({"path": str(problems), "latency_median_s": 0.8, "latency_sigma": 1.0,
                      "latency_max_s": 30.0}, seed=0)  # fmt: skip
    draws = [env.latency_s({"id": i}, 1) for i in range(4000)]
    assert statistics.median(draws) == pytest.approx(0.8, rel=0.08)
    logs = [math.log(x) for x in draws if x < 30.0]
    assert statistics.pstdev(logs) == pytest.approx(1.0, rel=0.1)
    assert max(draws) <= 30.0 and env.latency_s({"id": 3}, 2) == env.latency_s({"id": 3}, 2)
    assert Calculator({"path": str(problems)}, 0).latency_s({"id": 0}, 1) == 0.0
    fast = Calculator({"path": str(problems), "latency_median_s": 0.2}, 0)  # sigma 0: median
    s = fast.prompt(0)
    conv = [*s["messages"], {"role": "assistant", "content": "<tool>1+1</tool>"}]
    t = time.perf_counter()
    assert asyncio.run(fast.step(s, conv))["content"] == "2"
    assert 0.2 <= time.perf_counter() - t < 1.0


def test_calculator_and_reasoning_gym_are_task_types(problems, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"runtime:\n  task: {{type: calculator, path: {problems}, "
                      "latency_median_s: 0.8, latency_sigma: 1.0, max_turns: 3}\n")  # fmt: skip
    task = load_config(config).runtime.task
    assert isinstance(task, CalculatorTask)
    env = env_task(task)
    assert isinstance(env, PythonTask) and env.max_turns == 3 and env.args["latency_sigma"] == 1.0
    gen = make_task(task, seed=0, max_answer_len=32)
    assert isinstance(gen, PythonTaskGen) and gen.max_turns == 3
    assert gen.prompt(0).sample["answer"] in ("391", "1024")
    missing = load_config(config, overrides=[f"runtime.task.path={tmp_path / 'nope.jsonl'}"])
    from laminar.runtime.run.inputs import check_inputs
    from laminar.runtime.tasks.jsonl import TaskFileError

    with pytest.raises(TaskFileError, match=r"nope\.jsonl"):
        check_inputs(missing)
    rg = load_config(overrides=["runtime.task={type: reasoning_gym, datasets: {leg_counting: 1}}"])
    assert isinstance(rg.runtime.task, ReasoningGymTask)
    with pytest.raises(ConfigError, match="weights must be > 0"):
        load_config(overrides=["runtime.task={type: reasoning_gym, datasets: {gcd: 0}}"])
    assert env_task(load_config().runtime.task) is None  # the repeat task is no environment


def test_reasoning_gym_generates_offline_and_scores_with_its_own_scorer(monkeypatch):
    pytest.importorskip("reasoning_gym")

    def no_network(*args, **kwargs):
        raise AssertionError("reasoning_gym tried the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    options = {"basic_arithmetic": {"min_terms": 2, "max_terms": 3}}
    task = ReasoningGymTask(datasets={"basic_arithmetic": 1.0, "leg_counting": 3.0}, size=100,
                            options=options)  # fmt: skip
    gen = make_task(task, seed=5, max_answer_len=64)
    env = gen.env
    samples = [gen.prompt(i).sample for i in range(60)]
    names = [s["dataset"] for s in samples]
    assert set(names) == {"basic_arithmetic", "leg_counting"} and names.count("leg_counting") > 30
    again = make_task(task, seed=5, max_answer_len=64).prompt(7).sample
    assert again == samples[7]  # every process draws the same sample for an index
    s = samples[0]
    assert s["messages"][0]["role"] == "system" and "<answer>" in s["messages"][0]["content"]
    right = [{"role": "assistant", "content": f"thinking... {env.target(s)}"}]
    assert env.reward(s, right) == 1.0
    assert env.reward(s, [{"role": "assistant", "content": "<answer>-1e9</answer>"}]) < 1.0
    assert env.reward(s, [{"role": "assistant", "content": "no answer tags"}]) == 0.0
    with pytest.raises(ConfigError, match="no reasoning-gym generator named 'nope'"):
        make_task(ReasoningGymTask(datasets={"nope": 1.0}), seed=0, max_answer_len=8)


def test_a_chat_template_renders_the_environment_message_between_turns(tmp_path):
    from laminar.runtime.models.codec import HfCodec
    from laminar.runtime.models.localmodel import make_model_dir

    codec = HfCodec(str(make_model_dir(tmp_path / "qwen", seed=0)))
    end = codec.stop_ids[0]  # <|im_end|>: the assistant turn's stop token, generated already
    ids = codec.observation_ids({"role": "tool", "content": "391"}, end)
    text = codec._tok.decode(ids, skip_special_tokens=False)
    assert text == "\n<|im_start|>tool\n391<|im_end|>\n<|im_start|>assistant\n"
    head = codec.messages_ids([{"role": "user", "content": "q"}])
    answer = [*codec.encode("a"), end]
    whole = codec.messages_ids([{"role": "user", "content": "q"},
                                {"role": "assistant", "content": "a"},
                                {"role": "tool", "content": "391"}])  # fmt: skip
    assert head + answer + ids == whole  # what the template renders for the conversation
