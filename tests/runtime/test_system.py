"""The runtime's ledger, repack and recovery on fake engines (production code otherwise).

Invariants from ``laminar/runtime/records.py`` and ``manager.py``: every trajectory handed out
is consumed exactly once, waits in the buffer, or is still in progress (none lost); a trajectory
keeps one weight version; a moved trajectory continues from its partial tokens.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from laminar.policy import repack
from laminar.runtime.data import manager as runtime_manager
from laminar.runtime.models.codec import CharCodec, prompt_ids
from laminar.runtime.records import PromptGroup
from tests.runtime import harness

CODEC = CharCodec()


def _answer_ok(t) -> bool:
    text = CODEC.decode(t.prompt_ids)
    count, letter = text.rstrip("=").split("*")
    return t.tokens == [*CODEC.encode(letter * int(count)), CODEC.eos_id]


def test_accounting_every_trajectory_consumed_once_or_pending(tmp_path):
    s = harness.build(tmp_path, max_batch=12, n=4, prompts_per_step=3)
    steps = 8
    asyncio.run(harness.run_laminar(s, steps))
    ledger = {tid: row for tid, row in s.buffer.rows.items()}
    pending = {t.traj_id for t in s.partial.pending()}
    issued = s.prompts.issued * 4
    consumed = [t.traj_id for t in s.consumed]
    assert len(consumed) == len(set(consumed)) == steps * 3 * 4  # exactly once
    assert {tid for tid, r in ledger.items() if r["consumed_version"] >= 0} == set(consumed)
    assert not pending & set(ledger)  # never both finished and in progress
    assert issued == len(ledger) + len(pending)  # none lost
    for row in ledger.values():
        t = row["traj"]
        assert _answer_ok(t), t  # migrated or not, each answer continued exactly
        if row["consumed_version"] >= 0:
            assert row["consumed_version"] >= t.version  # staleness >= 0, one version
    versions = {w.version for w in s.workers.values()}
    assert max(versions) >= 1  # rollouts did pull newer weights during the run


def _spy(monkeypatch):
    calls = []
    real = repack.plan_repack

    def spy(states):
        moves = real(states)
        calls.append((list(states), moves))
        return moves

    monkeypatch.setattr(repack, "plan_repack", spy)
    return calls


def test_runtime_and_simulator_share_plan_repack():
    from laminar.sim import manager as sim_manager

    assert sim_manager.plan_repack is repack.plan_repack
    assert runtime_manager.repack is repack  # the runtime looks it up there at every check


async def _repack_scenario(s, calls):
    await harness.boot(s)
    r0, r1 = s.workers["r0"], s.workers["r1"]
    engines = [w.engine for w in (r0, r1)]
    for e in engines:
        e.hold_over = 0  # every sequence stops after its first token until released
    # Each replica: a short group that finishes at once and a long one, the long tail.
    await r0.submit_groups([_group(0, "2*a="), _group(1, "40*b=")])
    await r1.submit_groups([_group(2, "3*c="), _group(3, "45*d=")])
    await _until(lambda: all(len(e.running) == 4 for e in engines))
    assert await s.manager.check() == []  # the baseline: KV use has not fallen yet
    for e in engines:
        e.hold_over = 10  # the short groups finish; the long tails stay frozen
    await _until(lambda: all(len(w.trajs) == 2 for w in (r0, r1)))
    await s.manager.check()  # KV use fell: both replicas are candidates now
    for e in engines:
        e.hold_over = math.inf
    await _until(lambda: not (r0.tasks or r1.tasks))
    for w in s.workers.values():
        await w.streamer.close()


async def _until(cond, timeout_s: float = 30.0) -> None:
    async def poll():
        while not cond():
            await asyncio.sleep(0.002)

    await asyncio.wait_for(poll(), timeout_s)


def _group(pid: int, text: str) -> PromptGroup:
    return PromptGroup(pid, tuple(prompt_ids(CODEC, text)), 2)


def test_manager_carries_out_the_policy_moves_and_trajectories_continue(tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002)
    asyncio.run(_repack_scenario(s, calls))
    planned = [m for _, moves in calls for m in moves]
    assert planned, "the long tails should have been repacked"
    events = [e for e in s.manager.events if e["kind"] == "repack"]
    assert [(e["src"], e["dst"], e["planned"]) for e in events] == [
        (m.src, m.dst, len(m.traj_ids)) for m in planned
    ]
    states, _ = next(c for c in calls if c[1])
    assert all(isinstance(st, repack.ReplicaState) for st in states)
    moved = {tid for m in planned for tid in m.traj_ids}
    rows = {tid: r["traj"] for tid, r in s.buffer.rows.items()}
    assert moved <= set(rows)
    for tid in moved:
        t = rows[tid]
        dst = next(m.dst for m in planned if tid in m.traj_ids)
        assert t.migrations == 1 and t.replica_id == dst and t.version == 0
        assert _answer_ok(t)  # continued from its partial tokens to the exact answer
        resubmitted = [p for rid, p in s.workers[dst].engine.submitted if rid == f"{tid}#1"]
        assert resubmitted and len(resubmitted[0]) > len(t.prompt_ids)  # prompt + partial


async def _crash(worker) -> None:
    """A machine failure: the replica's tasks die without a word to anyone."""
    if worker.streamer.loop_task:
        worker.streamer.loop_task.cancel()
    for task in list(worker.tasks.values()):
        task.cancel()
    await asyncio.sleep(0)


class _Dead:
    def __getattr__(self, name):
        class _M:
            @staticmethod
            def remote(*a, **k):
                async def fail():
                    raise ConnectionError("actor died")

                return fail()

        return _M


async def _recovery_scenario(s):
    await harness.boot(s)
    r0 = s.workers["r0"]
    await r0.submit_groups([_group(0, "30*a="), _group(1, "35*b=")])
    await asyncio.sleep(0.03)  # some tokens generated and streamed to the partial pool
    await r0.streamer.flush()
    streamed = {t.traj_id: len(t.tokens) for t in s.partial.on_replica("r0")}
    await _crash(r0)
    s.manager.rollouts["r0"] = _Dead()
    await s.manager.check()
    r1 = s.workers["r1"]
    while r1.tasks:
        await asyncio.sleep(0.01)
    await r1.streamer.close()
    return streamed


def test_recovery_continues_a_dead_rollouts_trajectories(tmp_path):
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002)
    streamed = asyncio.run(_recovery_scenario(s))
    assert streamed and all(n > 0 for n in streamed.values())
    rows = {tid: r["traj"] for tid, r in s.buffer.rows.items()}
    assert set(rows) == set(streamed)  # all four came back, none lost
    for tid, t in rows.items():
        assert t.replica_id == "r1" and t.migrations == 1 and t.version == 0
        assert _answer_ok(t)
        sub = [p for rid, p in s.workers["r1"].engine.submitted if rid == f"{tid}#1"]
        assert len(sub[0]) >= len(t.prompt_ids) + streamed[tid]  # resumed, not restarted
    event = next(e for e in s.manager.events if e["kind"] == "recovery")
    assert event["continued"] == 4 and event["restarted"] == 0
    assert s.manager.dead == {"r0"}


@pytest.mark.parametrize("wrong_version", [1])
def test_pin_refuses_another_version(tmp_path, wrong_version):
    s = harness.build(tmp_path)

    async def go():
        await harness.boot(s)
        w = s.workers["r0"]
        return await w.pin(wrong_version), await w.pin(0), w.pins

    assert asyncio.run(go()) == (False, True, 1)
