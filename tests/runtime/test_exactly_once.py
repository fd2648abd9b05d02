"""Exactly-once delivery when a rollout dies between two of its calls to the data tier.

Between ``buffer.add`` and the partial-pool update: the dead replica's finished trajectories
were in the buffer *and* still in the partial pool, so recovery re-ran them, and the adopting
replica's streamer died on a second delivery, losing everything it finished later. Recovery now
asks the buffer first, and the buffer drops a second delivery instead of failing the streamer.

Between the prompt pool's answer and the registration in the partial pool: the samples handed
out were issued but held by no pool, so recovery (which reads the partial pool) never saw them
and they were lost, a whole hand-out (4 prompts x 4 samples in the e2e fault test). The prompt
pool now keeps each rollout's newest hand-out until it asks again; recovery reclaims it.
"""

from __future__ import annotations

import asyncio

from laminar.policy.repack import Move
from laminar.runtime.records import PromptGroup
from tests.runtime import harness
from tests.runtime.fakes import FakeEngine, LocalHandle
from tests.runtime.test_system import CODEC, _answer_ok, _crash, _Dead, prompt_ids


class _CutAfterAdd:
    """A partial pool whose update of finished trajectories never arrives (the replica died
    right after the buffer took them)."""

    def __init__(self, pool, died: asyncio.Event):
        self.pool, self.died = pool, died

    def update(self, fresh, deltas, done):
        if done:
            self.died.set()
            raise ConnectionError("replica died between buffer.add and the pool update")
        return self.pool.update(fresh, deltas, done)


def _group(pid: int, text: str) -> PromptGroup:
    return PromptGroup(pid, tuple(prompt_ids(CODEC, text)), 2)


async def _scenario(s):
    await harness.boot(s)
    r0, r1 = s.workers["r0"], s.workers["r1"]
    died = asyncio.Event()
    r0.streamer.partial_pool = LocalHandle(_CutAfterAdd(s.partial, died))
    # r0: a short group (finishes, is delivered, then r0 dies) and a long one (in progress).
    await r0.submit_groups([_group(0, "2*a="), _group(1, "40*b=")])
    await asyncio.wait_for(died.wait(), 10)
    await _crash(r0)
    s.manager.rollouts["r0"] = _Dead()
    assert {t.traj_id for t in s.partial.on_replica("r0")} >= {"p0-s0", "p0-s1"}  # the hole
    await s.manager.check()
    await r1.submit_groups([_group(2, "3*c=")])  # r1 goes on working after adopting
    while r1.tasks:
        await asyncio.sleep(0.01)
    await r1.streamer.close()


def test_death_between_buffer_add_and_pool_update_delivers_exactly_once(tmp_path):
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002, repack=False)
    asyncio.run(_scenario(s))
    rows = s.buffer.rows
    assert set(rows) == {f"p{p}-s{i}" for p in range(3) for i in range(2)}  # none lost
    assert s.partial.pending() == []  # nothing left counted as in progress
    event = next(e for e in s.manager.events if e["kind"] == "recovery")
    assert event["already_finished"] == 2 and event["continued"] == 2  # not re-run
    for tid in ("p0-s0", "p0-s1"):
        assert rows[tid]["traj"].replica_id == "r0"  # the first delivery stands
        assert not [r for r, _ in s.workers["r1"].engine.submitted if r.startswith(tid)]
    for tid in ("p1-s0", "p1-s1", "p2-s0", "p2-s1"):
        assert rows[tid]["traj"].replica_id == "r1" and _answer_ok(rows[tid]["traj"])
    assert s.buffer.duplicates == []


def test_a_second_delivery_is_dropped_and_the_streamer_lives_on(tmp_path):
    """Recovery racing a late delivery: the adopter delivers a trajectory already held."""
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002, repack=False)

    async def go():
        await harness.boot(s)
        r1 = s.workers["r1"]
        await r1.submit_groups([_group(0, "2*a=")])
        while r1.tasks:
            await asyncio.sleep(0.01)
        await r1.streamer.flush()
        first = dict(s.buffer.rows)
        again = [s.buffer.rows["p0-s0"]["traj"]]
        await r1.streamer.buffer.add.remote(again)  # a second delivery of p0-s0
        await r1.submit_groups([_group(1, "3*b=")])  # later work still reaches the buffer
        while r1.tasks:
            await asyncio.sleep(0.01)
        await r1.streamer.close()
        return first

    first = asyncio.run(go())
    assert set(s.buffer.rows) == {"p0-s0", "p0-s1", "p1-s0", "p1-s1"}
    assert s.buffer.rows["p0-s0"] is first["p0-s0"]
    assert [d["traj_id"] for d in s.buffer.duplicates] == ["p0-s0"]



class _DiesAfterTake:
    """A prompt pool whose answer to the rollout never arrives: the rollout dies right after
    the pool handed it groups (issued now), before it could register them."""

    def __init__(self, pool, died: asyncio.Event):
        self.pool, self.died = pool, died

    async def take(self, *args, **kwargs):
        out = self.pool.take(*args, **kwargs)
        if out:
            self.died.set()
            await asyncio.Event().wait()  # the answer has nowhere to go
        return out


def test_death_between_the_prompt_hand_out_and_its_registration_loses_nothing(tmp_path):
    s = harness.build(tmp_path, n=4, max_batch=16, step_s=0.002, repack=False)

    async def go():
        await harness.boot(s)
        r0, r1 = s.workers["r0"], s.workers["r1"]
        died = asyncio.Event()
        r0.prompt_pool = LocalHandle(_DiesAfterTake(s.prompts, died))
        loop = asyncio.create_task(r0.run_laminar(poll_s=0.002))
        await asyncio.wait_for(died.wait(), 10)
        loop.cancel()
        await _crash(r0)
        s.manager.rollouts["r0"] = _Dead()
        assert s.partial.pending() == [] and s.prompts.issued_groups() == 4  # the hole
        await s.manager.check()
        while r1.tasks:
            await asyncio.sleep(0.01)
        await r1.streamer.close()

    asyncio.run(go())
    issued = {f"p{p}-s{i}" for p in range(4) for i in range(4)}
    assert set(s.buffer.rows) == issued and s.partial.pending() == []  # none lost
    event = next(e for e in s.manager.events if e["kind"] == "recovery")
    assert event["unregistered"] == 16 and event["restarted"] == 16
    assert sorted(s.manager.restarted) == sorted(issued)  # recorded as restarted
    for row in s.buffer.rows.values():
        t = row["traj"]
        assert t.replica_id == "r1" and t.version == 0 and _answer_ok(t)
        assert t.max_tokens == harness.MAX_RESPONSE_LEN


class _DiesAdopting:
    """A rollout handle that pins, then dies before it takes the moved trajectories."""

    def __init__(self, worker):
        self.worker = worker

    async def pin(self, version):
        return await self.worker.pin(version)

    async def adopt(self, trajs, **kwargs):
        raise ConnectionError("the destination died during the move")


def test_a_move_whose_destination_dies_loses_nothing_and_the_manager_goes_on(tmp_path):
    """Repack meets a death: the source released the trajectories, the destination died before
    taking them. They are registered under the dead destination, whose recovery continues
    them; the manager's loop (a raised error there used to end it) carries on."""
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002, repack=False)

    async def go():
        await harness.boot(s)
        r0 = s.workers["r0"]
        await r0.submit_groups([_group(0, "30*a=")])
        await asyncio.sleep(0.03)
        await r0.streamer.flush()
        s.manager.rollouts["r1"] = LocalHandle(_DiesAdopting(s.workers["r1"]))
        move = Move("r0", "r1", ("p0-s0", "p0-s1"))
        assert await s.manager.execute(move, 0)  # no error: the next check finds r1 dead
        assert not r0.trajs and {t.replica_id for t in s.partial.pending()} == {"r1"}
        s.manager.rollouts["r1"] = _Dead()
        await _crash(s.workers["r1"])
        await s.manager.check()
        while r0.tasks:
            await asyncio.sleep(0.01)
        await r0.streamer.close()

    asyncio.run(go())
    rows = {tid: r["traj"] for tid, r in s.buffer.rows.items()}
    assert set(rows) == {"p0-s0", "p0-s1"} and s.partial.pending() == []
    for t in rows.values():
        assert t.replica_id == "r0" and t.migrations == 2 and _answer_ok(t)
    event = next(e for e in s.manager.events if e["kind"] == "recovery")
    assert event["src"] == "r1" and event["continued"] == 2


class _DeadEngine(FakeEngine):
    async def generate(self, request_id, prompt_ids, max_tokens):
        raise RuntimeError("EngineCore died")
        yield  # an async generator that fails at once


class _AnswersLate:
    """A prompt pool whose answer reaches the rollout only after ``late`` is set."""

    def __init__(self, pool, asked: asyncio.Event, late: asyncio.Event):
        self.pool, self.asked, self.late = pool, asked, late

    async def take(self, *args, **kwargs):
        out = self.pool.take(*args, **kwargs)
        if out:
            self.asked.set()
            await self.late.wait()
        return out


def test_a_dead_engines_late_registration_neither_loses_nor_holds_its_hand_out(tmp_path):
    """The engine died under a live actor, whose loop was waiting for prompts: recovery
    reclaims the hand-out before the actor registers it; that late registration (an older
    copy) must not take the samples back from their new rollout, and the actor gets no more
    prompts."""
    s = harness.build(tmp_path, n=4, max_batch=16, step_s=0.002, repack=False)

    async def go():
        await harness.boot(s)
        r0, r1 = s.workers["r0"], s.workers["r1"]
        asked, late = asyncio.Event(), asyncio.Event()
        r0.prompt_pool = LocalHandle(_AnswersLate(s.prompts, asked, late))
        r0.engine = _DeadEngine()
        loop = asyncio.create_task(r0.run_laminar(poll_s=0.002))
        await asyncio.wait_for(asked.wait(), 10)
        s.manager.rollouts["r0"] = _Dead()  # its snapshot fails: declared dead
        await s.manager.check()
        late.set()  # now r0 registers what it took, and its engine fails them
        await asyncio.wait_for(loop, 10)
        assert r0.watchdog.error and s.prompts.take(4, "r0", 64) == []
        while r1.tasks:
            await asyncio.sleep(0.01)
        await r1.streamer.close()
        await r0.streamer.close()

    asyncio.run(go())
    issued = {f"p{p}-s{i}" for p in range(4) for i in range(4)}
    assert s.prompts.issued_groups() == 4
    assert set(s.buffer.rows) == issued and s.partial.pending() == []
    assert all(r["traj"].replica_id == "r1" for r in s.buffer.rows.values())
