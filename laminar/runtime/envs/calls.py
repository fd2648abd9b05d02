"""Calls into an environment: off the caller's event loop, each within a timeout, with what
comes back checked. A call never raises: it answers ``(value, error)``, where ``error`` is
empty or ``"<method>_<why>: <detail>"`` with ``why`` one of ``raised``, ``timeout`` or
``invalid`` (the summary counts ``env_errors`` by the part before the colon).

Plain functions run in a thread pool of the caller's own (a hung call holds one of its
threads, never the event loop's default executor); coroutines, and awaitables a function
returns, run on one event loop in a thread of their own — from an event loop (:meth:`call`) a
coroutine function holds no thread while it waits, and one past its timeout is cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import json
import math
import numbers
import threading
from typing import Any

THREADS = 32  # environment calls in flight at once per process
DETAIL_CHARS = 300


class EnvCaller:
    """Runs ``env``'s methods with ``timeout_s`` each (module doc)."""

    def __init__(self, env: Any, timeout_s: float, threads: int = THREADS):
        self.env = env
        self.timeout_s = timeout_s
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, "laminar-env")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _env_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="laminar-env-loop", daemon=True
                ).start()
            return self._loop

    def _run(self, method: str, args: tuple) -> Any:
        """In a pool thread: the call, and the awaitable it returned awaited on the env loop."""
        out = getattr(self.env, method)(*args)
        if inspect.isawaitable(out):
            fut = asyncio.run_coroutine_threadsafe(_awaited(out), self._env_loop())
            try:
                return fut.result(self.timeout_s)
            except concurrent.futures.TimeoutError:
                fut.cancel()  # the coroutine is cancelled; this thread goes back to the pool
                raise
        return out

    async def _acall(self, method: str, args: tuple) -> Any:
        fn = getattr(self.env, method)
        if inspect.iscoroutinefunction(fn):  # straight onto the env loop: no thread waits on it
            return await _on(_called(fn, args), self._env_loop())
        out = await asyncio.wrap_future(self._pool.submit(fn, *args))
        if inspect.isawaitable(out):
            return await _on(_awaited(out), self._env_loop())
        return out

    async def call(self, method: str, *args: Any) -> tuple[Any, str]:
        """``env.method(*args)`` from an event loop, which it never blocks (cancelling the
        caller cancels a coroutine of the environment's too)."""
        try:
            out = await asyncio.wait_for(self._acall(method, args), self.timeout_s)
        except (TimeoutError, concurrent.futures.TimeoutError):
            return None, f"{method}_timeout: no answer within {self.timeout_s:g} s"
        except Exception as e:  # the environment's error costs one trajectory
            return None, _raised(method, e)
        return check(method, out)

    def call_sync(self, method: str, *args: Any) -> tuple[Any, str]:
        """``env.method(*args)`` from plain code (a thread may wait)."""
        fut = self._pool.submit(self._run, method, args)
        try:
            out = fut.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            return None, f"{method}_timeout: no answer within {self.timeout_s:g} s"
        except Exception as e:
            return None, _raised(method, e)
        return check(method, out)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


async def _awaited(aw: Any) -> Any:
    return await aw


async def _called(fn: Any, args: tuple) -> Any:
    return await fn(*args)


async def _on(coro: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """``coro`` run on ``loop`` (another thread's), awaited from this one; cancelling this
    await cancels it there."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def _raised(method: str, e: BaseException) -> str:
    return f"{method}_raised: {type(e).__name__}: {e}"[:DETAIL_CHARS]


def _invalid(method: str, why: str) -> tuple[None, str]:
    return None, f"{method}_invalid: {why}"[:DETAIL_CHARS]


def check(method: str, out: Any) -> tuple[Any, str]:
    """What ``method`` answered, checked (and copied, so the environment's own objects are
    never shared with the runtime)."""
    if method == "reward":
        return check_reward(out)
    if method == "prompt":
        return check_sample(out)
    if method == "target":
        return (out, "") if isinstance(out, str) else _invalid(method, _kind("a str", out))
    if method == "step":
        return check_message(out)
    return out, ""


def _kind(expected: str, out: Any) -> str:
    return f"expected {expected}, got {type(out).__name__} {repr(out)[:80]}"


def check_reward(out: Any) -> tuple[float | None, str]:
    """A finite real number (a bool counts as 0 or 1)."""
    if not isinstance(out, numbers.Real):
        return _invalid("reward", _kind("a number", out))
    value = float(out)
    if not math.isfinite(value):
        return _invalid("reward", f"{value} is not a finite number")
    return value, ""


def check_message(out: Any) -> tuple[dict | None, str]:
    """What ``step`` answers: None (the trajectory is done) or the next message, a dict with
    string ``role`` and ``content`` (other keys, e.g. ``tool_call_id`` or ``name``, are kept
    for the chat template)."""
    if out is None:
        return None, ""
    if not isinstance(out, dict):
        return _invalid("step", _kind("a message dict or None", out))
    for key in ("role", "content"):
        if not isinstance(out.get(key), str):
            return _invalid("step", f"the message's {key!r} must be a str, got "
                            f"{type(out.get(key)).__name__} {repr(out.get(key))[:80]}")  # fmt: skip
    if not out["role"]:
        return _invalid("step", "the message's 'role' is empty")
    try:  # it travels with the trajectory: through the pools and into checkpoints
        return json.loads(json.dumps(out)), ""
    except (TypeError, ValueError) as e:
        return _invalid("step", f"the message is not plain JSON data ({type(e).__name__}: {e})")


def check_sample(out: Any) -> tuple[dict | None, str]:
    """A dict with an ``id`` (str or int) and ``messages`` (chat messages: ``role`` and
    ``content`` strings) or a ``prompt`` (text)."""
    if not isinstance(out, dict):
        return _invalid("prompt", _kind("a dict", out))
    sid = out.get("id")
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        return _invalid("prompt", f"'id' must be a str or an int, got {type(sid).__name__}")
    if "messages" in out:
        msgs = out["messages"]
        ok = isinstance(msgs, (list, tuple)) and msgs and all(
            isinstance(m, dict) and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str) for m in msgs
        )  # fmt: skip
        if not ok:
            return _invalid("prompt", "'messages' must be a non-empty list of {role, content} "
                            "dicts with string values")  # fmt: skip
    elif not isinstance(out.get("prompt"), str):
        return _invalid("prompt", "a sample needs 'messages' (a list) or 'prompt' (a str)")
    return copy.deepcopy(out), ""
