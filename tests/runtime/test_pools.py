"""The data tier: flow control, exactly-once consumption, stale partial copies dropped."""

from __future__ import annotations

import asyncio

import pytest

from laminar.config.runtime import RepeatTask
from laminar.runtime.data.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.records import Traj, traj_id


def _pool(prefetch):
    return PromptPool(
        RepeatTask(),
        seed=3,
        max_answer_len=63,
        samples_per_prompt=4,
        prompts_per_step=5,
        prefetch_steps=prefetch,
        model_type="tiny",
        model_dir="",
    )


def test_prompt_pool_flow_control_and_determinism():
    p = _pool(1.0)
    first = p.take(100)
    assert len(first) == 10  # (0 consumed + 1 + 1 prefetch) x 5 prompts
    assert p.take(1) == []
    p.advance(1)
    assert len(p.take(100)) == 5
    again = _pool(1.0).take(3)
    assert again == first[:3]  # same seed -> same prompts
    assert len(_pool(None).take(37)) == 37  # sync mode: the caller sizes the batch


def test_prompt_pool_keeps_each_holders_newest_hand_out_until_it_asks_again():
    """What a rollout took and may not have registered yet: its newest hand-out only (it asks
    again after registering), reclaimed once, as fresh samples of no version."""
    p = _pool(None)
    p.take(2, "r0", 32)
    second = p.take(1, "r0", 32)
    p.take(3, "r1", 16)
    p.take(1)  # no holder (a caller that registers nothing): nothing kept
    back = p.reclaim("r0", 7.5)
    assert [(t.prompt_id, t.sample_index) for t in back] == [
        (second[0].prompt_id, i) for i in range(4)
    ]
    assert all(t.version == -1 and t.max_tokens == 32 and t.replica_id == "r0" for t in back)
    assert all(t.tokens == [] and t.gen_start_s == 7.5 for t in back)
    assert back[0].prompt_ids == second[0].prompt_ids
    assert p.reclaim("r0", 8.0) == [] and p.reclaim("r9", 8.0) == []
    assert len(p.reclaim("r1", 8.0)) == 12 and p.issued_groups() == 7
    # a reclaimed holder (declared dead, its actor maybe still running) gets nothing more
    assert p.take(2, "r0", 32) == [] and p.issued_groups() == 7
    assert len(p.take(2, "r2", 32)) == 2


def test_partial_pool_names_the_ids_it_never_saw():
    pool = PartialResponsePool()
    pool.update([_traj(0, 0), _traj(0, 1)], [], [])
    pool.update([], [], [traj_id(0, 1)])  # finished: seen
    assert pool.unknown([traj_id(0, 0), traj_id(0, 1), traj_id(1, 0)]) == [traj_id(1, 0)]


def _traj(pid, i, version=0, tokens=(), migrations=0):
    return Traj(
        traj_id(pid, i),
        pid,
        i,
        (1, 2),
        version,
        8,
        tokens=list(tokens),
        logprobs=[0.0] * len(tokens),
        migrations=migrations,
        reward=1.0,
    )


def test_buffer_hands_out_whole_groups_exactly_once():
    buf = ExperienceBuffer(samples_per_prompt=2, t0_s=0.0)

    async def go():
        await buf.add([_traj(0, 0), _traj(1, 0)])
        waiter = asyncio.create_task(buf.take(1, consumer_version=3, step=0))
        await asyncio.sleep(0.01)
        assert not waiter.done()  # no complete group yet
        await buf.add([_traj(1, 1)])
        (group,) = await asyncio.wait_for(waiter, 1)
        assert [t.traj_id for t in group] == ["p1-s0", "p1-s1"]
        assert await buf.add([_traj(1, 1)]) == 0  # a second delivery: dropped, recorded
        return await buf.ledger(), await buf.delivery_report()

    rows, report = asyncio.run(go())
    consumed = {r["traj"].traj_id: r["consumed_version"] for r in rows}
    assert consumed == {"p0-s0": -1, "p1-s0": 3, "p1-s1": 3}
    assert [d["traj_id"] for d in report["duplicate_deliveries"]] == ["p1-s1"]
    assert report["consumed_twice"] == []


def test_buffer_requeues_what_a_dead_trainer_step_took():
    buf = ExperienceBuffer(samples_per_prompt=1, t0_s=0.0)

    async def go():
        await buf.add([_traj(0, 0), _traj(1, 0), _traj(2, 0)])
        (g0,) = await buf.take(1, consumer_version=0, step=0)
        (g1,) = await buf.take(1, consumer_version=1, step=1)  # its trainer dies mid-step
        assert await buf.requeue_from(1) == 1
        again = await buf.take(2, consumer_version=1, step=1)
        return g0, g1, again, await buf.delivery_report()

    _g0, g1, again, report = asyncio.run(go())
    assert [g[0].traj_id for g in again] == [g1[0].traj_id, "p2-s0"]  # in its place, first
    assert report["consumed_twice"] == []


def test_partial_pool_streams_deltas_and_drops_stale_copies():
    pool = PartialResponsePool()
    pool.update([_traj(0, 0, tokens=[5])], [], [])
    pool.update([], [("p0-s0", 1, [6, 7], [0.0, 0.0]), ("p0-s0", 1, [9], [0.0])], [])
    assert pool.pending()[0].tokens == [5, 6, 7]  # the second delta has a stale offset
    pool.update([_traj(0, 0, tokens=[5, 6, 7, 8], migrations=1)], [], [])
    pool.update([_traj(0, 0, tokens=[5], migrations=0)], [], [])  # late copy from the source
    assert pool.pending()[0].tokens == [5, 6, 7, 8]
    pool.update([], [], ["p0-s0"])
    pool.update([_traj(0, 0, tokens=[5, 6], migrations=1)], [], [])  # arrives after it finished
    assert pool.pending() == []


def test_streamer_close_never_cuts_a_flush_in_half():
    from laminar.runtime.rollout.stream import PartialStreamer
    from tests.runtime.fakes import LocalHandle

    pool, buf = PartialResponsePool(), ExperienceBuffer(1, 0.0)

    class SlowBuffer:
        async def add(self, trajs):
            await asyncio.sleep(0.05)  # close() arrives while this flush waits here
            await buf.add(trajs)

    async def go():
        s = PartialStreamer(LocalHandle(pool), LocalHandle(SlowBuffer()), interval_s=0.001)
        t = _traj(0, 0, tokens=[5])
        await s.register([t])
        s.start()
        s.finished(t)
        await asyncio.sleep(0.01)  # the loop's flush is now inside SlowBuffer.add
        await s.close()

    asyncio.run(go())
    assert [r["traj"].traj_id for r in buf.rows.values()] == ["p0-s0"]
    assert pool.pending() == []  # finished: in the buffer and out of the partial pool


def test_a_dead_trainers_take_is_superseded_and_gives_back_what_it_took():
    """The dead trainer's take outlives it in the buffer: the retried step's take cancels it
    (still waiting) or gives back what it took (already served), so nothing is consumed by a
    trainer that never trained on it."""
    buf = ExperienceBuffer(samples_per_prompt=1, t0_s=0.0)

    async def go():
        orphan = asyncio.create_task(buf.take(2, consumer_version=0, step=0))  # dead caller
        await asyncio.sleep(0.01)
        retry = asyncio.create_task(buf.take(2, consumer_version=0, step=0))  # new trainer
        await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError, match="superseded"):
            await orphan
        await buf.add([_traj(0, 0), _traj(1, 0), _traj(2, 0)])
        served = await retry
        # served, then its trainer died too: the next retry gets the same groups back
        again = await buf.take(2, consumer_version=0, step=0)
        return served, again, await buf.delivery_report()

    served, again, report = asyncio.run(go())
    assert [g[0].traj_id for g in again] == [g[0].traj_id for g in served]
    assert report["consumed_twice"] == []
    assert sum(r["consumed_version"] >= 0 for r in buf.rows.values()) == 2


class _Remote:
    """``pool.method.remote(...)`` answered at once (with ``ray.get`` patched to identity)."""

    def __init__(self, pool, closing=None):
        self.pool, self.closing = pool, closing

    def __getattr__(self, name):
        method = getattr(self.pool, name)

        class _Call:
            @staticmethod
            def remote(*args):
                if self.closing and name == "take" and args[1] == self.closing[0]:
                    self.closing[1] -= 1
                    if self.closing[1] < 0:  # declared dead between two takes
                        self.pool.reclaim(args[1], 0.0)
                return method(*args)

        return _Call


@pytest.mark.parametrize("closing", [None, ("r2", 1)])
def test_a_rollout_declared_dead_before_the_hand_out_leaves_its_share_to_the_others(
    monkeypatch, closing
):
    """Sync mode hands each rollout its share of the step by name; one the manager declared
    dead after the driver read its live rollouts gets nothing from the pool: its share goes to
    the others (once the step waited 30 min for groups no one generated, CI of stop 35), each
    extra share kept with its holder's hand-out for a later recovery. ``closing``: a second
    rollout is declared dead during the extra hand-out."""
    from types import SimpleNamespace

    from laminar.config import load_config
    from laminar.runtime.run.loops import _hand_out

    monkeypatch.setattr("ray.get", lambda refs: refs)
    pool = _pool(None)
    pool.reclaim("r1", 0.0)  # the manager recovered r1 already
    cfg = load_config(preset="tiny-cpu", overrides=["workload.prompts_per_step=7"])
    a = SimpleNamespace(prompts=_Remote(pool, list(closing) if closing else None))
    workers = {"r0": "h0", "r1": "h1", "r2": "h2"}
    shares = dict(_hand_out(a, cfg, workers))
    assert set(shares) == {"h0", "h1", "h2"} and shares["h1"] == []
    assert sum(len(g) for g in shares.values()) == 7 == pool.issued_groups()
    if closing:  # r2 kept its first share (reclaimed with it), r0 took the rest
        assert len(shares["h2"]) == 2 and len(shares["h0"]) == 5
    kept = {t.prompt_id for t in pool.reclaim("r0", 1.0)}
    assert kept == {g.prompt_id for g in shares["h0"]}  # the whole share, for a recovery
