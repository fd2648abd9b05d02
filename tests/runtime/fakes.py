"""In-process stand-ins for the runtime's tests: an engine without vLLM, Ray-less handles.

``FakeEngine`` implements ``laminar.runtime.rollout.engine.Engine`` as a perfect solver of the
repeat task: it reads the count from the prompt and writes the letter that many times, one token per
``step_s`` (a multi-turn context: its last turn's, after the last BOS). Its output depends only on
the sequence it is given, so a trajectory resubmitted as
prompt + partial tokens continues exactly where it stopped — the property migration relies on.
A test may hold every sequence asked for more than ``hold_over`` tokens after its first one
(until it is aborted or ``hold_over`` rises), to freeze KV use between two manager checks
whatever the machine's load.
``LocalHandle`` gives a plain object the ``handle.method.remote(...)`` shape of a Ray actor.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Sequence

from laminar.runtime.models.codec import CharCodec
from laminar.runtime.rollout.engine import Delta, EngineStats


class FakeEngine:
    """Deterministic repeat-task engine (see module docstring)."""

    def __init__(self, step_s: float = 0.001, kv_capacity_tokens: int = 100_000):
        self.codec = CharCodec()
        self.step_s = step_s
        self.kv_capacity_tokens = kv_capacity_tokens
        self.aborted: set[str] = set()
        self.running: set[str] = set()
        self.loaded: list[str] = []
        self.submitted: list[tuple[str, tuple[int, ...]]] = []
        self.hold_over = math.inf

    async def start(self) -> None:
        pass

    def _task(self, seq: list[int]) -> tuple[int, str, int] | None:
        """(count, letter, tokens written) of a "<n>*<c>=" sequence, None when it is not one.
        A multi-turn context answers its last turn: what follows its last BOS (an
        observation of the tiny model starts with one, ``CharCodec.observation_ids``)."""
        bos, eq = self.codec.bos_id, self.codec.encode("=")[0]
        if bos in seq:
            seq = seq[len(seq) - seq[::-1].index(bos) :]
        if eq not in seq:
            return None
        cut = len(seq) - 1 - seq[::-1].index(eq)
        try:
            count, letter = self.codec.decode(seq[:cut]).split("*")
            return int(count), letter, len(seq) - cut - 1
        except ValueError:
            return None

    def _next(self, seq: list[int]) -> int:
        task = self._task(seq)
        if task is None:
            return self.codec.eos_id
        count, letter, done = task
        return self.codec.eos_id if done >= count else self.codec.encode(letter)[0]

    async def _held(self, request_id: str, seq: list[int], n: int) -> None:
        task = self._task(seq)
        while n and task and task[0] > self.hold_over and request_id not in self.aborted:
            await asyncio.sleep(self.step_s)

    async def generate(self, request_id: str, prompt_ids: Sequence[int], max_tokens: int):
        self.submitted.append((request_id, tuple(prompt_ids)))
        self.running.add(request_id)
        seq, n = list(prompt_ids), 0
        try:
            while True:
                await self._held(request_id, seq, n)
                await asyncio.sleep(self.step_s)
                if request_id in self.aborted:
                    yield Delta((), (), "abort")
                    return
                tok = self._next(seq)
                seq.append(tok)
                n += 1
                reason = (
                    "stop" if tok == self.codec.eos_id else "length" if n >= max_tokens else None
                )
                yield Delta((tok,), (-0.1,), reason)
                if reason:
                    return
        finally:
            self.running.discard(request_id)

    async def abort(self, request_ids: Sequence[str]) -> None:
        self.aborted.update(request_ids)

    def stats(self) -> EngineStats:
        return EngineStats(self.kv_capacity_tokens, 0.0, len(self.running), 0)

    async def load_weights(self, path: str) -> None:
        self.loaded.append(path)

    async def shutdown(self) -> None:
        pass


class LocalHandle:
    """``handle.method.remote(*args)`` -> an awaitable, like a Ray actor handle in async code."""

    def __init__(self, obj: object):
        self._obj = obj

    def __getattr__(self, name: str):
        fn = getattr(self._obj, name)

        class _Method:
            @staticmethod
            def remote(*args, **kwargs):
                return _awaitable(fn(*args, **kwargs))

        return _Method


async def _awaitable(value):
    return await value if inspect.isawaitable(value) else value


class SpecFakeEngine(FakeEngine):
    """A :class:`FakeEngine` built like the real one, from an ``EngineSpec`` (kept for checks)."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec


class ProcessFakeEngine(SpecFakeEngine):
    """A :class:`SpecFakeEngine` with an engine *process* of its own (a sleeping child), as
    vLLM's EngineCore: killing it is an engine crash, seen through :meth:`alive`."""

    async def start(self) -> None:
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    async def shutdown(self) -> None:
        self.proc.kill()
        self.proc.wait()
