"""Detection without ``step_timeout_s``: an engine that hangs under its live actor."""

from __future__ import annotations

import asyncio

from tests.runtime import harness
from tests.runtime.test_exactly_once import _group
from tests.runtime.test_system import _answer_ok


class _HangingEngine:
    """A FakeEngine that stops producing tokens (a hung engine process) after ``after``."""

    def __init__(self, engine, after: int):
        self.engine, self.after, self.hung = engine, after, asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.engine, name)

    async def generate(self, request_id, prompt_ids, max_tokens):
        n = 0
        async for d in self.engine.generate(request_id, prompt_ids, max_tokens):
            if n >= self.after:
                self.hung.set()
                await asyncio.Event().wait()  # never again a token
            n += 1
            yield d


def test_a_hung_engine_is_declared_dead_by_the_watchdog_and_its_work_moves(tmp_path):
    """No token for ``engine_stall_s`` with requests running: the snapshot raises, the manager
    recovers the trajectories on a healthy replica (no ``step_timeout_s`` involved)."""
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002, repack=False)
    r0, r1 = s.workers["r0"], s.workers["r1"]
    r0.engine = _HangingEngine(r0.engine, after=3)
    r0.watchdog.stall_s = 0.2

    async def go():
        await harness.boot(s)
        await r0.submit_groups([_group(0, "20*a=")])
        await asyncio.wait_for(r0.engine.hung.wait(), 5)
        await r0.streamer.flush()
        assert await s.manager.check() == [] and not s.manager.dead  # stalled only briefly
        await asyncio.sleep(0.3)
        await s.manager.check()
        while r1.tasks or not s.buffer.rows:
            await asyncio.sleep(0.01)
        await r1.streamer.close()

    asyncio.run(asyncio.wait_for(go(), 30))
    assert s.manager.dead == {"r0"}
    event = next(e for e in s.manager.events if e["kind"] == "recovery")
    assert "no token" in event["reason"] and event["continued"] == 2
    assert {t["traj"].replica_id for t in s.buffer.rows.values()} == {"r1"}
    assert all(_answer_ok(r["traj"]) for r in s.buffer.rows.values())
