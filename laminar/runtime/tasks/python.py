"""An environment of your own as the run's task (``runtime.task = {type: python, entry, args}``).

The environment (``laminar.runtime.envs``) hands out samples with ``prompt(index)`` and scores
conversations with ``reward(sample, messages)``; one with ``step(sample, messages)`` plays
several turns (``laminar.runtime.rollout.turns``, at most ``max_turns``). RL prompt ``i`` is
``prompt(i)``; the warm-up and held-out streams ask for indices ``2**30 + i`` and
``2 * 2**30 + i`` (an environment that
cycles over a list takes the index modulo its length). Every process asks for itself, so
``prompt`` must answer the same sample for the same index and seed; each process remembers the
samples it was last handed. Calls go through :class:`~laminar.runtime.envs.calls.EnvCaller`:
off the event loop, within ``timeout_s``, checked; a failed call scores the trajectory 0 and
names why (``Prompt.error``, the reward's error).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from laminar.errors import LaminarError
from laminar.runtime.envs.calls import EnvCaller
from laminar.runtime.envs.load import load_env, multi_turn
from laminar.runtime.tasks.base import Prompt

STREAM_BASE = 1 << 30  # index of stream s's prompt i: s * STREAM_BASE + i
REMEMBERED = 4096  # samples each process keeps (a group's n trajectories ask for one)


class PythonTaskGen:
    """Prompts and rewards of a user environment (module doc)."""

    def __init__(self, cfg: Any, *, seed: int, max_answer_len: int):
        self.cfg = cfg
        self.env = load_env(cfg, seed)
        self.caller = EnvCaller(self.env, cfg.timeout_s)
        self.has_target = callable(getattr(self.env, "target", None))
        self.max_turns = getattr(cfg, "max_turns", 1) if multi_turn(self.env) else 1
        self._seen: OrderedDict[tuple[int, int], Prompt] = OrderedDict()

    @staticmethod
    def index(prompt_id: int, stream: int) -> int:
        return stream * STREAM_BASE + prompt_id

    def _made(self, key: tuple[int, int], sample: dict | None, error: str) -> Prompt:
        if error:
            p = Prompt(key[0], "", "", error=error)
        elif "messages" in sample:
            msgs = tuple(sample["messages"])
            p = Prompt(key[0], "\n".join(m["content"] for m in msgs), "", msgs, sample)
        else:
            p = Prompt(key[0], sample["prompt"], "", (), sample)
        self._seen[key] = p
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return p

    def prompt(self, prompt_id: int, *, stream: int = 0) -> Prompt:
        """Sample ``prompt_id`` of ``stream``, from plain code (the prompt pool, the warm-up)."""
        key = (prompt_id, stream)
        if key in self._seen:
            return self._seen[key]
        return self._made(key, *self.caller.call_sync("prompt", self.index(prompt_id, stream)))

    async def aprompt(self, prompt_id: int, *, stream: int = 0) -> Prompt:
        """:meth:`prompt` from an event loop (a rollout), which it never blocks."""
        key = (prompt_id, stream)
        if key in self._seen:
            return self._seen[key]
        return self._made(key, *await self.caller.call("prompt", self.index(prompt_id, stream)))

    def target(self, p: Prompt) -> str:
        """What the warm-up teaches for ``p``: the environment's ``target(sample)``."""
        if p.error:
            raise LaminarError(f"runtime.task {self.cfg.entry}: warm-up prompt: {p.error}")
        out, error = self.caller.call_sync("target", copy.deepcopy(p.sample))
        if error:
            raise LaminarError(f"runtime.task {self.cfg.entry}: warm-up target of sample "
                               f"{p.sample.get('id')!r}: {error}")  # fmt: skip
        return out

    @staticmethod
    def conversation(p: Prompt, response: str) -> list[dict]:
        """The whole conversation: the prompt's messages (or its text as the user's turn) and
        the answer as the assistant's turn."""
        head = [dict(m) for m in p.messages] or [{"role": "user", "content": p.text}]
        return [*head, {"role": "assistant", "content": response}]

    async def ascore(self, p: Prompt, response: str, *, finished: bool) -> tuple[float, str]:
        """(reward, why it is 0 when the environment failed: empty otherwise)."""
        return await self.ascore_messages(p, self.conversation(p, response))

    async def ascore_messages(self, p: Prompt, messages: list[dict]) -> tuple[float, str]:
        """(reward of the conversation ``messages``, why it is 0 when the environment failed:
        empty otherwise); a multi-turn trajectory's (``laminar.runtime.rollout.turns``)."""
        if p.error:
            return 0.0, p.error
        reward, error = await self.caller.call("reward", copy.deepcopy(p.sample), messages)
        return (0.0, error) if error else (reward, "")

    def reward(self, p: Prompt, response: str, *, finished: bool) -> float:
        """:meth:`ascore`'s reward, from plain code."""
        if p.error:
            return 0.0
        args = (copy.deepcopy(p.sample), self.conversation(p, response))
        reward, error = self.caller.call_sync("reward", *args)
        return 0.0 if error else reward
