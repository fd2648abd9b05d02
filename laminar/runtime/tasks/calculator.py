"""``calculator``: math problems with a calculator tool, a multi-turn environment
(``runtime.task = {type: calculator, path: problems.jsonl, ...}``, or ``{type: python, entry:
"laminar.runtime.tasks.calculator:make", args: {path: ..., ...}}``).

The problems are a JSONL file as the ``jsonl`` task reads it (``{"prompt": ..., "answer": ...}``
per line), walked in a seeded order, a fresh permutation per pass. The model is told (system
message) that it may end an answer with a call, in either form:

- ``<tool>expression</tool>``;
- its chat template's tool call: ``<tool_call>{"name": "calculator", "arguments":
  {"expression": "..."}}</tool_call>`` (Qwen, Hermes) or the bare JSON object (Llama 3.1's
  ``{"name": ..., "parameters": {...}}``).

``step`` finds the answer's last call, unless a ``\\boxed{}`` answer follows it, evaluates it
safely (``safe_eval``: arithmetic only, nothing is ``eval``-ed) and answers ``{"role": "tool",
"name": "calculator", "content": value}`` (or ``error: why``) after a latency drawn from a
log-normal (``latency_median_s``, ``latency_sigma``, capped at ``latency_max_s``, as the
simulator's ``tool-calling`` preset models it) — slept on the environment's event loop, so a
slow calculator holds no thread while the other trajectories decode. An answer without a call
ends the conversation. ``reward`` is 1 when the last answer's final answer (its last
``\\boxed{}``, else its last number) equals the reference (the ``jsonl`` task's verifier),
else 0. The latency is drawn from the run's seed, the sample and the turn: a conversation
replayed (a trajectory asking again after a move) waits as long again.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re

import numpy as np

from laminar.runtime.tasks.jsonl import load_rows
from laminar.runtime.tasks.safe_eval import CalcError, evaluate, show
from laminar.runtime.tasks.verifier import is_correct

SYSTEM = (
    "Solve the problem. You have a calculator: to use it, end your message with "
    "<tool>expression</tool> (numbers, + - * / ** %, parentheses, sqrt, log, exp, factorial) and "
    "its value comes back in the next message. When you know the answer, write it as "
    "\\boxed{answer}."
)
_TAG = re.compile(r"<tool>(.*?)</tool>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_JSON_CALL = re.compile(r"\{[^{}]*\"name\"\s*:\s*\"calculator\"[^{}]*\{[^{}]*\}[^{}]*\}", re.DOTALL)
_BOXED = "\\boxed{"


def find_call(text: str) -> tuple[int, str] | None:
    """(where, expression) of the last calculator call in ``text``, in any of the forms the
    module doc lists; None without one."""
    calls = [(m.start(), m.group(1)) for m in _TAG.finditer(text)]
    for m in (*_TOOL_CALL.finditer(text), *_JSON_CALL.finditer(text)):
        expression = _json_expression(m.group(1) if m.groups() else m.group(0))
        if expression is not None:
            calls.append((m.start(), expression))
    return max(calls) if calls else None


def _json_expression(text: str) -> str | None:
    try:
        call = json.loads(text)
    except ValueError:
        return None
    if not isinstance(call, dict) or call.get("name") not in ("calculator", "calc"):
        return None
    args = call.get("arguments", call.get("parameters"))
    if isinstance(args, str):  # some templates write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return args
    if isinstance(args, dict):
        value = args.get("expression", next(iter(args.values()), None))
        return value if isinstance(value, str) else None
    return None


def calculate(expression: str) -> str:
    """The calculator's answer to ``expression``: its value, or ``error: why``."""
    try:
        return show(evaluate(expression))
    except CalcError as e:
        return f"error: {e}"


class Calculator:
    """The environment (module doc)."""

    def __init__(self, args: dict, seed: int):
        self.rows = load_rows(args["path"])
        self.seed = seed
        self.median_s = float(args.get("latency_median_s") or 0.0)
        self.sigma = float(args.get("latency_sigma") or 0.0)
        self.max_s = float(args.get("latency_max_s", 30.0))
        system = args.get("system_prompt")
        self.system = SYSTEM if system is None else str(system)
        self._orders: dict[int, np.ndarray] = {}

    def _row(self, index: int) -> int:
        n = len(self.rows)
        epoch = index // n
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng([self.seed, 29, epoch]).permutation(n)}
        return int(self._orders[epoch][index % n])

    def prompt(self, index: int) -> dict:
        row = self._row(index)
        text, answer = self.rows[row]
        head = [{"role": "system", "content": self.system}] if self.system else []
        return {"id": row, "messages": [*head, {"role": "user", "content": text}],
                "answer": answer}  # fmt: skip

    def target(self, sample: dict) -> str:
        """What the warm-up teaches: the answer, boxed."""
        return f"\\boxed{{{sample['answer']}}}"

    def latency_s(self, sample: dict, turn: int) -> float:
        """The calculator's latency for this sample's call at ``turn`` (seeded: module doc)."""
        if self.median_s <= 0:
            return 0.0
        rng = random.Random(f"{self.seed}:{sample['id']}:{turn}")
        return min(self.max_s, self.median_s * math.exp(self.sigma * rng.gauss(0.0, 1.0)))

    async def step(self, sample: dict, messages: list[dict]) -> dict | None:
        text = messages[-1]["content"]
        call = find_call(text)
        if call is None or text.rfind(_BOXED) > call[0]:
            return None  # no call, or the answer came after it: done
        turn = sum(1 for m in messages if m["role"] == "assistant")
        delay = self.latency_s(sample, turn)
        if delay > 0:
            await asyncio.sleep(delay)
        return {"role": "tool", "name": "calculator", "content": calculate(call[1])}

    def reward(self, sample: dict, messages: list[dict]) -> float:
        answer = messages[-1]["content"]
        return 1.0 if answer and is_correct(answer, sample["answer"]) else 0.0


def make(args: dict, seed: int) -> Calculator:
    return Calculator(args, seed)
