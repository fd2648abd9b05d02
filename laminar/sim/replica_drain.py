"""A replica's drain planned ahead: its segments up to the next visible event, at once.

Once a replica has admitted everything it holds (nobody waiting), its next segments are fixed
until something happens that the rest of the cluster can see: a GRPO group may complete (the
last of its trajectories held here finishes: the group enters the experience buffer if none is
left elsewhere), the replica runs dry (it goes idle and refills), or its KV cache would overflow
(a preemption). Completions before that change only the replica itself. So instead of one
decoder event per completion (~200 K in the 1024-GPU headline), the replica plans the chain of
segments up to that event (:meth:`ReplicaDrain._plan_chain`) and the decoder wakes it only at
the chain's end; ``Replica.plan_drains = False`` turns this off (tests compare the two).

The chain is carried out lazily: whoever looks at the replica before then (a repack check, a
sync before a move, the statistics at the warm-up's end, the run's end) first calls
:meth:`ReplicaDrain._catch_up`, which applies the segments that ended before that moment as the
decoder would have (same arithmetic in the same order, so the same bits; completions stamped
with their own segment's end) and leaves the one in progress as the replica's segment. An
outside change is followed by a wake; the decoder then re-plans from there and drops the rest.
New work queued on a busy replica without a wake (a baseline's round dealt out) ends the chain
at the segment in progress, where it would have been admitted anyway (``Replica.assign``).
"""

from __future__ import annotations

from heapq import heappop


class ReplicaDrain:
    """Mixed into :class:`~laminar.sim.replica.Replica`: its fast segment plan and the chain
    that extends it; uses the replica's state."""

    def _plan_fast(self, now: float, n: int, b: int, kv: int) -> float:
        """``Replica._plan`` with no prefill, core sharing or series: a segment of ``b``
        sequences holding ``kv`` tokens, up to the next completion (``n`` steps away) or
        overflow; then the chain after it (:meth:`_plan_chain`). Returns when the decoder
        must end the segment (or the chain)."""
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
        fire_s = now + (self.seg_end - now)  # when a SimPy timeout of seg_end - now would fire
        self.seg_fire_s = fire_s
        return self._plan_chain(fire_s) if self._chains else fire_s

    def _plan_chain(self, fire_s: float) -> float:
        """Plan the segments after the current one (which ends at ``fire_s``) up to the next
        visible event; return when the decoder must wake the replica. Call right after the
        current segment is planned, with nobody waiting."""
        heap = self.heap
        if len(heap) == len(self.running):  # no stale entry (one live entry per running)
            live = sorted(heap)
        else:
            live = sorted([e for e in heap if e[2].heap_seq == e[1]])
        self.heap = live  # a sorted list is a heap
        b, n = self.seg_b, self.seg_n
        steps, kv = self.steps + n, self.kv + n * b
        cap, per_kv_s, fixed_s = self.capacity, self._per_kv_s, self._fixed_by_batch_s
        # A group may complete when its last trajectory here finishes (its others may be
        # elsewhere, a baseline's even share of a batch): the chain stops there.
        last = {e[2].group: k for k, e in enumerate(live)}
        i, m = 0, len(live)
        chain: list[tuple] = []
        while True:
            while i < m and live[i][0] <= steps:  # finished by the end of the last segment
                t = live[i][2]
                if last[t.group] == i:  # the experience buffer may see it (or it runs dry)
                    return self._keep_chain(chain, fire_s)
                i += 1
                kv -= t.prompt_len + t.response_len
                b -= 1
            n = live[i][0] - steps
            if (cap - kv) // b < n:  # the KV cache overflows first: a preemption
                return self._keep_chain(chain, fire_s)
            # ``Replica._plan_fast``'s arithmetic; its start is the last end (busy = now)
            a = fixed_s[b] + kv * per_kv_s
            c = b * per_kv_s
            end_s = fire_s + (n * a + c * (n * (n - 1) / 2))
            chain.append((end_s, fire_s, n, a, c, b, kv))
            fire_s = fire_s + (end_s - fire_s)
            kv += n * b
            steps += n

    def _keep_chain(self, chain: list[tuple], last_fire_s: float) -> float:
        if chain:
            chain.reverse()  # popped from the end: earliest first
            self.chain = chain
        return last_fire_s

    def _catch_up(self, now: float) -> None:
        """Apply the planned segments that ended before ``now`` (never the chain's last: the
        decoder ends that one); the one in progress becomes the current segment."""
        chain = self.chain
        fire_s = self.seg_fire_s
        if not chain or fire_s >= now:
            return
        if self.seg_done:  # partly applied by a ``sync``: the general arithmetic
            self._apply(self.seg_n)
            self.seg_done = 0
            self.seg_n = 0  # nothing left of it to apply below
        heap, running = self.heap, self.running
        kv_token_s, decoded, steps, kv = self.kv_token_s, self.decoded_tokens, self.steps, self.kv
        n, a, c, kv0, b = self.seg_n, self.seg_a, self.seg_c, self.seg_kv0, self.seg_b
        done = 0
        while True:
            if n:  # ``Replica.step``'s arithmetic
                s1 = n * (n - 1) / 2
                s2 = (n - 1) * n * (2 * n - 1) / 6
                kv_token_s += a * kv0 * n + (a * b + c * kv0) * s1 + c * b * s2
                steps += n
                kv += n * b
                decoded += n * b
            while heap[0][0] <= steps:  # its completions (no group's last here among them)
                t = heappop(heap)[2]
                del running[t.tid]
                r = t.response_len
                kv -= t.prompt_len + r
                t.generated, t.heap_seq, t.gen_end_s = r, -1, fire_s
                t.group.remaining -= 1
                done += 1
            end_s, t0_s, n, a, c, b, kv0 = chain.pop()
            fire_s = t0_s + (end_s - t0_s)
            if not chain or fire_s >= now:
                break
        self.kv_token_s, self.decoded_tokens, self.steps, self.kv = kv_token_s, decoded, steps, kv
        self.completed += done
        self.seg_fire_s, self.seg_end, self.busy_until, self.seg_t0 = fire_s, end_s, t0_s, t0_s
        self.seg_n, self.seg_done, self.seg_a, self.seg_c, self.seg_b, self.seg_kv0 = (
            n, 0, a, c, b, kv0
        )  # fmt: skip
