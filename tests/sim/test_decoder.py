"""The decoder process: every replica's segment ends, in time order with the rest of SimPy."""

from __future__ import annotations

import simpy

from laminar.sim.decoder import Decoder


class FakeReplica:
    """Plans segments of fixed lengths; logs every end (``step``) the decoder hands it."""

    def __init__(self, env, decoder, name, lengths_s, log):
        self.env, self.decoder, self.name = env, decoder, name
        self.lengths_s = list(lengths_s)
        self.log = log
        self.decoder_entry = None  # the decoder keeps its place in the heap here
        self.handed_back_s: list[float] = []
        self.process = env.process(self.run())

    def run(self):
        while True:
            self.parked = parked = self.env.event()  # the decoder triggers it to hand back
            self.decoder.start(self)
            yield parked
            self.handed_back_s.append(self.env.now)
            self.log.append((self.env.now, self.name + " idle", False))
            return

    def begin(self, now):
        return now + self.lengths_s.pop(0) if self.lengths_s else None

    def step(self, now, woken):
        assert now == self.env.now  # the clock reads exactly the planned end
        self.log.append((now, self.name, woken))
        return self.begin(now)


def test_segment_ends_interleave_with_other_events_in_time_order():
    env = simpy.Environment()
    dec = Decoder(env)
    log: list = []
    a = FakeReplica(env, dec, "a", [0.3, 0.3, 0.3], log)
    b = FakeReplica(env, dec, "b", [0.25, 0.5], log)

    def other():
        for t in (0.1, 0.55, 0.7):
            yield env.timeout(t - env.now)
            log.append((env.now, "other", False))

    env.process(other())
    env.run(until=5)
    times = [t for t, _, _ in log]
    assert times == sorted(times)
    names = [n for _, n, _ in log if not n.endswith("idle")]
    assert names == ["other", "b", "a", "other", "a", "other", "b", "a"]
    assert a.handed_back_s == [0.3 + 0.3 + 0.3] and b.handed_back_s == [0.75]


def test_a_woken_replica_is_replanned_at_once_and_its_old_end_never_fires():
    env = simpy.Environment()
    dec = Decoder(env)
    log: list = []
    a = FakeReplica(env, dec, "a", [1.0, 0.5], log)

    def poke():
        yield env.timeout(0.4)
        dec.wake(a)
        log.append((env.now, "poke", False))

    env.process(poke())
    env.run(until=5)
    # the wake re-plans at 0.4 (0.5 more); the end planned for 1.0 is stale and dropped
    assert log == [(0.4, "poke", False), (0.4, "a", True), (0.9, "a", False),
                   (0.9, "a idle", False)]  # fmt: skip
    assert a.handed_back_s == [0.9]


def test_an_idle_decoder_wakes_for_a_replica_that_starts_later():
    env = simpy.Environment()
    dec = Decoder(env)
    log: list = []

    def late():
        yield env.timeout(2.0)
        FakeReplica(env, dec, "late", [0.5], log)

    env.process(late())
    env.run(until=5)
    assert log == [(2.5, "late", False), (2.5, "late idle", False)]


def test_a_tie_with_another_event_runs_after_it():
    env = simpy.Environment()
    dec = Decoder(env)
    log: list = []

    def other():
        yield env.timeout(0.5)
        log.append((env.now, "other", False))

    env.process(other())
    FakeReplica(env, dec, "a", [0.5], log)
    env.run(until=5)
    assert log == [(0.5, "other", False), (0.5, "a", False), (0.5, "a idle", False)]


def test_a_replica_gone_idle_refills_before_the_next_woken_one_is_replanned():
    # The per-replica processes ran each interrupt's re-plan, refill included, in turn.
    env = simpy.Environment()
    dec = Decoder(env)
    log: list = []
    a = FakeReplica(env, dec, "a", [1.0], log)  # nothing after its first segment: idle
    b = FakeReplica(env, dec, "b", [1.0, 0.2], log)

    def poke():
        yield env.timeout(0.5)
        dec.wake(a)
        dec.wake(b)

    env.process(poke())
    env.run(until=5)
    assert log == [(0.5, "a", True), (0.5, "a idle", False), (0.5, "b", True),
                   (0.7, "b", False), (0.7, "b idle", False)]  # fmt: skip


def test_partial_pool_holds_exactly_the_started_unfinished_trajectories():
    from laminar.sim.api import load_run_workload
    from laminar.sim.cluster import Cluster
    from laminar.sim.costdata import cost_model_for
    from laminar.sim.systems import Laminar

    from .conftest import small_config

    cfg = small_config("cluster.gpus=32", "workload.prompts_per_step=12", "workload.steps=4")
    cluster = Cluster(cfg, Laminar(cfg), cost_model_for(cfg), load_run_workload(cfg))
    for until_s in (2.0, 5.0, 10.0):
        cluster.env.run(until=until_s)
        started = cluster.prompts.trajectories
        unfinished = {t.tid for t in started if t.gen_start_s == t.gen_start_s}  # not NaN
        unfinished -= {t.tid for t in started if t.gen_end_s == t.gen_end_s}
        assert unfinished and set(cluster.partial.active) == unfinished


def test_the_indexed_heap_always_tops_the_earliest_live_entry():
    # Random inserts, re-plans (a key moving either way) and removals: the top is always the
    # smallest (end, seq) of the live entries, and every entry knows its place.
    import random

    from laminar.sim.decoder import Entry, _place, _remove

    rng = random.Random(7)
    heap: list[Entry] = []
    entries = [Entry(i) for i in range(40)]
    seq = 0
    for _ in range(4000):
        e = rng.choice(entries)
        op = rng.random()
        if op < 0.2 and e.pos >= 0:
            _remove(heap, e)
        else:
            seq += 1
            e.end_s, e.seq = float(rng.randrange(50)), seq  # ties on end_s are common
            _place(heap, e)
        live = [x for x in entries if x.pos >= 0]
        assert sorted(x.replica for x in live) == sorted(x.replica for x in heap)
        assert all(heap[x.pos] is x for x in live)
        if heap:
            assert heap[0] is min(live, key=lambda x: (x.end_s, x.seq))
