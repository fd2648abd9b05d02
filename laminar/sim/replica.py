"""A rollout replica: continuous batching over a KV cache measured in tokens (paper §3.1).

Mechanism, as vLLM does it: trajectories wait in FIFO order and are admitted while fewer than B
run and their KV (prompt plus tokens generated so far) fits under the capacity minus a
watermark; admitted ones are prefilled together, then every running trajectory gains one token
per decode step. When the next step would overflow the cache, the most recently admitted
trajectory is preempted (its KV dropped, its tokens kept) and re-prefilled when readmitted.

Between two events the batch is constant, so the replica plans one segment up to the next
completion or overflow, computed in closed form (``laminar.sim.decode``); the cluster's
:class:`~laminar.sim.decoder.Decoder` runs every replica's segments in one process and calls
:meth:`Replica.step` at each segment's end. With ``sim.decode: reference`` a segment is a single
step instead (tests only). The replica's own SimPy process only idles and refills.

Whoever changes a replica from outside (the rollout manager moving trajectories, a system
interrupting rollouts at a weight update) first calls :meth:`sync` to bring its counters to the
present, changes it, then calls :meth:`wake` so it plans a new segment.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Any, Final

import simpy

from laminar.sim.decode import kv_integral, steps_within
from laminar.sim.pools import Trajectory
from laminar.sim.replica_outside import ReplicaOutside
from laminar.sim.systems import System

# The completion heap holds plain ints, ``finish step << SEQ_BITS | seq``: the order of
# (finish step, admission seq) with one C-level int comparison per sift, no tuple to build.
SEQ_BITS: Final = 32
SEQ_MASK: Final = (1 << 32) - 1


class Replica(ReplicaOutside):
    """One rollout replica (``cost.replica_gpus`` GPUs) and its SimPy process (idle, refill)."""

    def __init__(self, cluster, index: int, machine: int, relay_pos: int):
        self.env: simpy.Environment = cluster.env
        self.cluster = cluster
        self.rid = f"r{index}"
        self.index = index
        self.machine = machine
        self.relay_pos = relay_pos  # position of its machine's relay in the broadcast chain
        cost = cluster.cost
        self.cost = cost
        # Hot path (a lookup per segment): the cost model and core sharing are fixed per run.
        # Typed, so that the compiled build does their arithmetic on plain doubles.
        self._decode_fixed_s = cost.decode_fixed_s
        # decode_fixed_s by batch size, computed once per run (admission keeps b <= max_batch)
        self._fixed_by_batch_s: list[float] = cluster.decode_fixed_by_batch_s
        self._per_kv_s: float = float(cost.decode_per_kv_token_s)
        self._share = cluster.core_sharing  # None: this replica has its GPUs to itself
        self.capacity = cost.kv_capacity_tokens
        self.admit_cap = int(cost.kv_capacity_tokens * (1.0 - cluster.cfg.sim.kv_watermark))
        self.max_batch = cluster.cfg.sim.max_batch
        self.one_step: bool = cluster.cfg.sim.decode == "reference"
        self.version = 0
        self.batches = 0  # prompt batches taken so far
        # by admission seq, in admission order: the last is preempted first
        self.running: dict[int, Trajectory] = {}
        self.heap: list[int] = []  # finish step << SEQ_BITS | seq; stale once seq leaves running
        self.waiting: deque[Trajectory] = deque()
        # by id: held here while waiting on their environment (``laminar.sim.turns``)
        self.away: dict[int, Trajectory] = {}
        self.back: Any = None  # a SimPy event, fired when one returns while only those are held
        self._turns = cluster.turns  # None: single-turn trajectories only
        self.steps = 0  # decode steps taken since the start
        self.kv = 0  # KV tokens held by running trajectories
        self._seq = 0
        # The current segment: decode starts at seg_t0 (after any prefill), n steps planned.
        self.seg_t0 = self.seg_end = self.seg_a = self.seg_c = 0.0
        self.seg_n = self.seg_done = self.seg_b = self.seg_kv0 = 0
        self.busy_until = 0.0  # end of the prefill in progress
        self.down_until = 0.0  # its machine is dead until then (``laminar.sim.faults``)
        self.in_segment = False
        self._wake_pending = False
        # Statistics (token-seconds of KV, idle seconds, decoded tokens).
        self.kv_token_s = 0.0
        self.idle_s = 0.0
        self.idle_since: float | None = None
        self.decoded_tokens = 0
        self.reprefill_tokens = 0
        self.completed = 0  # trajectories finished here
        self.preemptions = 0  # trajectories preempted here (KV full)
        self._series = cluster.series if cluster.cfg.sim.replica_series else None
        # Laminar and most baselines wait until a replica is empty to refill it: skip the
        # no-op call after every completion.
        system = cluster.system
        self._top_up = None if type(system).top_up is System.top_up else system.top_up
        # Decoding alone, with no core sharing or series: ``begin`` inlines ``_plan``.
        self._fast: bool = self._share is None and self._series is None and not self.one_step
        # ``step``'s fused path applies (single-turn completions only)
        self._lean: bool = self._fast and self._top_up is None and self._turns is None
        self.decoder = cluster.decoder
        self.decoder_entry: Any = None  # its place in the decoder's heap (made on first use)
        self.parked: simpy.Event | None = None  # what its process waits on while decoding
        self.process = self.env.process(self.run())

    # The process --------------------------------------------------------------------------

    def run(self):
        """Idle periods and refills; the decode segments in between run in the cluster's
        :class:`~laminar.sim.decoder.Decoder`, which hands the replica back once it is empty."""
        env = self.env
        cluster = self.cluster
        system = cluster.system
        while True:
            if not self.running and not self.waiting:
                self.idle_since = env.now
                self._record(0)
                self._busy(False)
                if self.away:  # it holds only trajectories waiting on their environment
                    while True:  # until one returns or they are moved away
                        self.back = env.event()  # ``wake`` fires it
                        yield self.back
                        if self.running or self.waiting or not self.away:
                            break
                        # Woken with nothing to run (new weights, a core-mate re-planning):
                        # a new idle point, and it stays idle; turning busy here would wake
                        # its core-mates, which would wake it back, at the same instant.
                        self.idle_s += env.now - self.idle_since
                        self.idle_since = env.now
                        self._record(0)
                else:
                    yield from self.wait_up()
                    yield from system.refill(cluster, self)
                self.idle_s += env.now - self.idle_since
                self.idle_since = None
                self._busy(True)
                continue
            self.parked = parked = env.event()  # the decoder triggers it when done
            self.decoder.start(self)
            yield parked  # while the decoder runs its segments

    def step(self, now: float, woken: bool) -> float | None:
        """End the current segment at ``now`` (``woken``: cut short by :meth:`wake`) and plan
        the next (:meth:`begin`); called by the decoder, once per completion: the bulk of a
        run. The common case (a planned end, a replica with nothing else to call) runs
        :meth:`_step_any`, :meth:`_complete` and :meth:`begin`'s fast path fused here, with the
        counters in locals: the same arithmetic in the same order, so the same bits."""
        if woken or self.seg_done or not self._lean:
            return self._step_any(now, woken)
        n, steps, kv = self.seg_n, self.steps, self.kv
        if n > 0:
            a, c, kv0, b = self.seg_a, self.seg_c, self.seg_kv0, self.seg_b
            s1 = n * (n - 1) / 2
            s2 = (n - 1) * n * (2 * n - 1) / 6
            self.kv_token_s += a * kv0 * n + (a * b + c * kv0) * s1 + c * b * s2
            self.steps = steps = steps + n
            kb = n * b
            kv += kb
            self.decoded_tokens += kb
            self.seg_done = n
        self.in_segment = False
        heap, running = self.heap, self.running
        done = freed = 0
        limit = (steps + 1) << SEQ_BITS
        while heap and heap[0] < limit:  # ``_complete``
            seq = heappop(heap) & SEQ_MASK
            t = running.get(seq)
            if t is None:
                continue  # stale: preempted or moved since it was pushed
            del running[seq]
            done += 1
            r = t.response_len
            freed += t.prompt_len + r
            t.generated, t.heap_seq, t.gen_end_s = r, -1, now
            g = t.group
            g.remaining -= 1
            if g.remaining == 0:  # the whole GRPO group is done: into the experience buffer
                self.kv = kv - freed  # deliver may look at this replica
                freed = 0
                self.cluster.system.deliver(self.cluster, g)
                kv = self.kv
        self.kv = kv = kv - freed
        self.completed += done
        b = len(running)
        if not b or self.waiting or kv + b > self.capacity:
            return self.begin(now)  # idle, admission or preemption: the general path
        top = heap[0]
        while top & SEQ_MASK not in running:
            heappop(heap)  # stale: preempted or moved since it was pushed
            top = heap[0]
        return self._plan_fast(now, (top >> SEQ_BITS) - steps, b, kv)

    def _step_any(self, now: float, woken: bool) -> float | None:
        """:meth:`step` in general (see there)."""
        if woken:
            self._wake_pending = False
        elif self.seg_done:  # brought forward by a ``sync`` without a wake
            self._apply(self.seg_n)
        elif self.seg_n > 0:
            # ``_apply`` and ``kv_integral`` inlined: the same arithmetic, so the same bits
            n, a, c, kv, b = self.seg_n, self.seg_a, self.seg_c, self.seg_kv0, self.seg_b
            s1 = n * (n - 1) / 2
            s2 = (n - 1) * n * (2 * n - 1) / 6
            self.kv_token_s += a * kv * n + (a * b + c * kv) * s1 + c * b * s2
            self.steps += n
            kb = n * b
            self.kv += kb
            self.decoded_tokens += kb
            self.seg_done = n
        self.in_segment = False
        done = self._complete(now)
        if done and (self.running or self.away) and self._top_up is not None:
            self._top_up(self.cluster, self)
        return self.begin(now)

    def begin(self, now: float) -> float | None:
        """Admit, preempt and plan the next segment at ``now``; the moment it ends (None: the
        replica is empty). Runs once per completion, the bulk of a run's events: with nobody
        waiting and no core sharing or series, ``_plan`` is inlined (same arithmetic)."""
        running = self.running
        if not running and not self.waiting:
            return None
        kv, b = self.kv, len(running)
        if self.waiting or not self._fast or kv + b > self.capacity:
            prefill_s = self._admit() if self.waiting else 0.0
            if self.kv + len(running) > self.capacity:
                self._preempt_overflow()
            self._plan(prefill_s, now)
        else:
            heap = self.heap
            top = heap[0]
            while top & SEQ_MASK not in running:
                heappop(heap)  # stale: preempted or moved since it was pushed
                top = heap[0]
            return self._plan_fast(now, (top >> SEQ_BITS) - self.steps, b, kv)
        self.in_segment = True
        return now + (self.seg_end - now)  # when a SimPy timeout of seg_end - now would fire

    def _plan_fast(self, now: float, n: int, b: int, kv: int) -> float:
        """``_plan`` with no prefill, core sharing or series: a segment of ``b`` sequences
        holding ``kv`` tokens, up to the next completion (``n`` steps away) or overflow."""
        room = (self.capacity - kv) // b
        if room < n:
            n = room
        busy = self.busy_until
        if busy < now:
            busy = now
        self.busy_until = self.seg_t0 = busy
        per_kv_s = self._per_kv_s
        self.seg_a = a = self._fixed_by_batch_s[b] + kv * per_kv_s
        self.seg_c = c = b * per_kv_s
        self.seg_n, self.seg_done, self.seg_b, self.seg_kv0 = n, 0, b, kv
        self.seg_end = busy + (n * a + c * (n * (n - 1) / 2))
        self.in_segment = True
        return now + (self.seg_end - now)  # when a SimPy timeout of seg_end - now would fire

    def assign(self, trajs: list[Trajectory]) -> None:
        """Queue new trajectories, generated with this replica's current weights."""
        now, version, rid = self.env.now, self.version, self.rid
        self.batches += 1
        for t in trajs:
            t.version = version
            t.replica = rid
            t.gen_start_s = now
        if self._turns is not None:
            self._turns.start(trajs)
        self.waiting.extend(trajs)

    def _busy(self, busy: bool) -> None:
        """Tell the cores this replica shares (if any) that it starts or stops decoding."""
        if self._share is not None:
            self._share.busy_changed(self.cluster, self, busy)

    def wait_up(self):
        """A process body: return once the replica's machine is alive (at once if it is)."""
        while self.down_until > self.env.now:
            yield self.env.timeout(self.down_until - self.env.now)

    # Segments -----------------------------------------------------------------------------

    def _admit(self) -> float:
        """FIFO admission while B and the KV cache allow; returns the prefill seconds."""
        running, waiting, heap = self.running, self.waiting, self.heap
        # Counters kept in locals through the loop (one pass per admitted trajectory).
        kv, seq, steps, held = self.kv, self._seq, self.steps, len(running)
        max_batch, admit_cap = self.max_batch, self.admit_cap
        lengths = []
        while waiting and held < max_batch:
            t = waiting[0]
            gen = t.generated
            need = t.prompt_len + gen
            if kv + need + held + 1 > admit_cap:
                if not held:
                    raise RuntimeError(f"{self.rid}: trajectory {t.tid} can never fit its KV")
                break
            waiting.popleft()
            if gen:
                self.reprefill_tokens += need
            seq += 1
            running[seq] = t
            t.admit_step = steps
            t.gen_at_admit = gen
            t.heap_seq = seq
            heappush(heap, (steps + t.stop - gen) << SEQ_BITS | seq)  # its turn's end
            kv += need
            held += 1
            lengths.append(need)
        if seq > SEQ_MASK:
            raise RuntimeError(f"{self.rid}: more than {SEQ_MASK} admissions")
        self.kv, self._seq = kv, seq
        return self.cost.prefill_s(lengths) if lengths else 0.0

    def _preempt_overflow(self) -> None:
        """Preempt the newest trajectories until one more step fits in the KV cache."""
        running = self.running
        while len(running) > 1 and self.kv + len(running) > self.capacity:
            _, t = running.popitem()
            t.generated = t.gen_at_admit + self.steps - t.admit_step
            self.kv -= t.prompt_len + t.generated
            t.heap_seq = -1
            t.preemptions += 1
            self.preemptions += 1
            self.waiting.appendleft(t)

    def _plan(self, prefill_s: float, now: float) -> int:
        """Set up the segment up to the next completion or overflow; returns its steps."""
        heap, running = self.heap, self.running
        top = heap[0]
        while top & SEQ_MASK not in running:
            heappop(heap)  # stale: preempted or moved since it was pushed
            top = heap[0]
        b = len(running)
        kv = self.kv
        # Next completion or KV overflow; the reference stepper stops after every step.
        n = min((top >> SEQ_BITS) - self.steps, (self.capacity - kv) // b)
        if self.one_step:
            n = min(n, 1)
        share = self._share
        slow = 1.0 if share is None else share.slowdown(self)  # cores shared with busy peers
        busy = self.busy_until
        if busy < now:
            busy = now
        if prefill_s:
            prefill_s *= slow
            busy += prefill_s
            self.kv_token_s += kv * prefill_s
        self.busy_until = self.seg_t0 = busy
        per_kv_s = self._per_kv_s
        self.seg_a = a = slow * (self._decode_fixed_s(b) + kv * per_kv_s)
        self.seg_c = c = slow * b * per_kv_s
        self.seg_n, self.seg_done, self.seg_b, self.seg_kv0 = n, 0, b, kv
        # segment_time_s, inlined (the same arithmetic, so the same bits)
        self.seg_end = busy + (n * a + c * (n * (n - 1) / 2))
        if self._series is not None:
            self._record(kv + n * b)
        return n

    def _record(self, kv_peak: int) -> None:
        """A point of the per-replica time series (``laminar.sim.results.replicas_frame``);
        ``kv_peak`` is the KV the segment reaches at its end if nothing interrupts it."""
        if self._series is not None:
            self._series.append(
                (self.env.now, self.index, self.kv, kv_peak, len(self.running),
                 len(self.waiting), self.version)
            )  # fmt: skip

    def _apply(self, n: int) -> None:
        """Account steps ``seg_done..n`` of the current segment."""
        done = self.seg_done
        k = n - done
        if k <= 0:
            return
        a, c, kv0, b = self.seg_a, self.seg_c, self.seg_kv0, self.seg_b
        self.kv_token_s += kv_integral(n, a, c, kv0, b)
        if done:
            self.kv_token_s -= kv_integral(done, a, c, kv0, b)
        self.steps += k
        kb = k * b
        self.kv += kb
        self.decoded_tokens += kb
        self.seg_done = n

    def _steps_by(self, now: float) -> int:
        """Whole steps of the current segment done by ``now``."""
        if not self.in_segment or now <= self.seg_t0:
            return self.seg_done
        return min(self.seg_n, steps_within(now - self.seg_t0, self.seg_a, self.seg_c))

    def _complete(self, now: float) -> int:
        """Retire every trajectory whose last token was generated by the current step (the
        step counter reads it at ``now``); return how many. A multi-turn trajectory whose turn
        ended leaves for its environment instead (``laminar.sim.turns``)."""
        heap = self.heap
        limit = (self.steps + 1) << SEQ_BITS  # entries below it finish by the current step
        if not heap or heap[0] >= limit:
            return 0
        running = self.running
        cluster = self.cluster
        turns = self._turns
        done = freed = 0
        while heap and heap[0] < limit:
            seq = heappop(heap) & SEQ_MASK
            t = running.get(seq)
            if t is None:
                continue  # stale: preempted or moved since it was pushed
            del running[seq]
            t.heap_seq = -1
            if turns is not None:
                s = t.turn_state
                if s is not None and s.turn < s.turns - 1:  # a turn ended: the environment next
                    freed += t.prompt_len + t.stop
                    t.generated = t.stop
                    turns.leave(self, t, s, now)
                    continue
            done += 1
            r = t.response_len
            freed += t.prompt_len + r
            t.generated = r
            t.gen_end_s = now
            g = t.group
            g.remaining -= 1
            if g.remaining == 0:  # the whole GRPO group is done: into the experience buffer
                self.kv -= freed  # deliver may look at this replica: bring its KV up to date
                freed = 0
                cluster.system.deliver(cluster, g)
        self.kv -= freed
        self.completed += done
        return done
