"""Scripted multi-turn environments for the tests (``runtime.task = {type: python, entry:
"tests.runtime.turn_envs:make", args: {...}}``): the tiny model cannot learn tool use in a test,
so the environment forces the turns.

Sample ``index`` asks ``"<n>*a="``; after each of the first ``turns - 1`` assistant turns,
``step`` answers a ``tool`` message with the next question (``"<m>*b="``, then ``c``, ``d``,
...), after the last one None. ``reward`` is 1 when every assistant turn answered its question
(what ``FakeEngine`` does), 0.25 when the conversation has the right number of turns only, else
0. ``latency_s``: each ``step`` that answers a message waits that long first. ``misbehave``:
``index % 8`` picks a misbehaviour of ``step`` on the second turn (1 raises, 2 hangs, 3 answers
a non-string content, 4 answers a string, 5 answers a NaN ``reward``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter

LETTERS = "abcdefgh"


def question(n: int, turn: int) -> tuple[int, str]:
    """(count, letter) asked at assistant turn ``turn`` (1-based) of sample ``n``."""
    return 1 + (n + turn - 1) % 4, LETTERS[(turn - 1) % len(LETTERS)]


class Scripted:
    def __init__(self, args: dict, seed: int):
        self.turns = int(args.get("turns", 3))
        self.latency_s = float(args.get("latency_s", 0.0))
        self.misbehave = bool(args.get("misbehave", False))
        self.calls: Counter = Counter()  # (sample id, turn) -> step calls

    def prompt(self, index: int) -> dict:
        n = 1 + index % 4
        count, letter = question(n, 1)
        return {"id": f"q{index}", "messages": [{"role": "user", "content": f"{count}*{letter}="}],
                "n": n, "index": index}  # fmt: skip

    def target(self, sample: dict) -> str:
        count, letter = question(sample["n"], 1)
        return letter * count

    def _next(self, sample: dict, messages: list[dict]) -> dict | None:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        self.calls[(sample["id"], turn)] += 1
        if turn >= self.turns:
            return None
        count, letter = question(sample["n"], turn + 1)
        return {"role": "tool", "content": f"{count}*{letter}=", "name": "asker"}

    def _misbehaviour(self, sample: dict, messages: list[dict]) -> int:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return sample["index"] % 8 if self.misbehave and turn == 2 else 0

    async def step(self, sample: dict, messages: list[dict]) -> dict | None:
        kind = self._misbehaviour(sample, messages)
        if kind == 1:
            raise RuntimeError(f"the tool crashed on {sample['id']}")
        if kind == 2:
            await asyncio.sleep(3600)
        if kind == 3:
            return {"role": "tool", "content": 42}
        if kind == 4:
            return "a plain string"
        out = self._next(sample, messages)
        if out is not None and self.latency_s:
            await asyncio.sleep(self.latency_s)
        return out

    def reward(self, sample: dict, messages: list[dict]) -> float:
        if self.misbehave and sample["index"] % 8 == 5:
            return math.nan
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        if len(answers) != self.turns:
            return 0.0
        want = [letter * count for count, letter in
                (question(sample["n"], k) for k in range(1, self.turns + 1))]  # fmt: skip
        return 1.0 if answers == want else 0.25


class ScriptedSync(Scripted):
    """The same with a plain ``step`` (a thread of the caller's pool) that sleeps."""

    def step(self, sample: dict, messages: list[dict]) -> dict | None:
        out = self._next(sample, messages)
        if out is not None and self.latency_s:
            time.sleep(self.latency_s)
        return out


def make(args: dict, seed: int) -> Scripted:
    return Scripted(args, seed)


def make_sync(args: dict, seed: int) -> ScriptedSync:
    return ScriptedSync(args, seed)
