"""One SimPy process that runs every replica's decode segments, instead of a process each.

A replica's decode segment ends at a time known when it is planned (``laminar.sim.replica``).
With a SimPy timeout per segment and an interrupt per outside change (a repack move, a weight
update), SimPy's own bookkeeping was a large share of a run: there is a segment per completion,
~200 K in the 1024-GPU headline. The decoder keeps every replica's segment end in a heap of its
own (one :class:`Entry` per replica, moved in place when its segment is re-planned, so nothing
goes stale; typed, so the compiled build compares plain doubles instead of tuples) and, while
the earliest one comes before any other scheduled SimPy event, moves the clock to it and handles
it at once; otherwise it sleeps in SimPy until that moment, so events from the rest of the
cluster (trainer, relay, rollout manager, faults) still interleave in time order.
``Replica.wake`` queues the replica here; the decoder re-plans queued replicas before anything
else, as SimPy ran the interrupts it replaces (urgent, in the order raised). A replica hands
back to its own process only to go idle and refill: while decoding, its process waits on the
event ``replica.parked``, which the decoder triggers (urgently, where an interrupt would land,
without the cost of building and throwing one).

Ties (a segment ending at exactly the moment of another SimPy event) are handled after the
other event; the per-process design ordered them by when each was scheduled.

SimPy has no public call to move the clock to a given moment or to schedule an event at an
exact time (``schedule`` adds a delay to ``now``, which rounds), so the decoder reads and sets
``Environment._now`` and pushes onto ``Environment._queue`` (SimPy 4's layout).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections import deque
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT


class Entry:
    """A decoding replica's place in the decoder's heap: when its segment ends, the order it
    was planned in (ties go to the earlier), and where in the heap it sits (-1: not there)."""

    __slots__ = ("end_s", "pos", "replica", "seq")

    def __init__(self, replica: Any) -> None:
        self.replica: Any = replica
        self.end_s: float = 0.0
        self.seq: int = 0
        self.pos: int = -1


def _before(a: Entry, b: Entry) -> bool:
    return a.end_s < b.end_s or (a.end_s == b.end_s and a.seq < b.seq)


def _sift_up(heap: list[Entry], pos: int) -> None:
    """Move the entry at ``pos`` towards the root while it comes before its parent."""
    e = heap[pos]
    while pos > 0:
        parent = (pos - 1) >> 1
        p = heap[parent]
        if not _before(e, p):
            break
        heap[pos] = p
        p.pos = pos
        pos = parent
    heap[pos] = e
    e.pos = pos


def _sift_down(heap: list[Entry], pos: int) -> None:
    """Move the entry at ``pos`` towards the leaves while a child comes before it."""
    n = len(heap)
    e = heap[pos]
    while True:
        child = 2 * pos + 1
        if child >= n:
            break
        c = heap[child]
        if child + 1 < n:
            right = heap[child + 1]
            if _before(right, c):
                child += 1
                c = right
        if not _before(c, e):
            break
        heap[pos] = c
        c.pos = pos
        pos = child
    heap[pos] = e
    e.pos = pos


def _place(heap: list[Entry], e: Entry) -> None:
    """Put ``e`` where its key says: added when not in the heap, else moved either way."""
    if e.pos < 0:
        heap.append(e)
        _sift_up(heap, len(heap) - 1)
    else:
        _sift_up(heap, e.pos)
        _sift_down(heap, e.pos)


def _remove(heap: list[Entry], e: Entry) -> None:
    """Take ``e`` out of the heap."""
    last = heap.pop()
    pos = e.pos
    e.pos = -1
    if last is not e:
        heap[pos] = last
        last.pos = pos
        _place(heap, last)


class Decoder:
    """The decode-segment process of one cluster; ``start`` and ``wake`` are its entry points."""

    def __init__(self, env: simpy.Environment):
        queue = getattr(env, "_queue", None)
        if not (isinstance(queue, list) and hasattr(env, "_now") and hasattr(env, "_eid")):
            raise RuntimeError(
                f"laminar.sim.decoder reads SimPy 4's Environment internals (_now, _queue, _eid); "
                f"SimPy {simpy.__version__} lays them out differently: pin simpy<5"
            )
        self.env = env
        self._heap: list[Entry] = []  # every decoding replica's entry, earliest end first
        self._next_seq = itertools.count(1).__next__  # ties: the segment planned first ends first
        self._woken: deque = deque()  # replicas to re-plan now, in the order woken
        self._parked = False  # sleeping in SimPy (it looks at its queues before it sleeps)
        self._sleep_until_s = math.inf  # when parked: until when (inf: until kicked)
        self._kicked = False  # an interrupt is on its way
        self.process = env.process(self.run())

    def start(self, replica) -> None:
        """A replica with work (after a refill) plans its first segment; call from its process."""
        end_s = replica.begin(self.env.now)
        if end_s is not None:
            self._push(replica, end_s)
            if self._parked and end_s < self._sleep_until_s:
                self._kick()

    def wake(self, replica) -> None:
        """Re-plan ``replica`` now (its segment was cut short from outside)."""
        self._woken.append(replica)
        if self._parked:
            self._kick()

    def _kick(self) -> None:
        if not self._kicked:
            self._kicked = True
            self.process.interrupt()

    def _push(self, replica, end_s: float | None) -> bool:
        """Put the replica's next segment end in the heap (its entry moves if already there);
        False when it went idle instead (handed back to its process, to refill)."""
        e = replica.decoder_entry
        if e is None:
            e = replica.decoder_entry = Entry(replica)
        if end_s is None:
            if e.pos >= 0:
                _remove(self._heap, e)
            # Resume its process now, urgently: where and when an interrupt would (SimPy
            # schedules one at URGENT with no delay), without building and throwing one.
            ev = replica.parked
            ev._ok, ev._value = True, None
            self.env.schedule(ev, URGENT)
            return False
        e.end_s = end_s  # re-planned early, the new end may come before or after the old one
        e.seq = self._next_seq()
        _place(self._heap, e)
        return True

    def run(self):
        env = self.env
        queue = env._queue  # SimPy's scheduled events: (time, priority, id, event)
        heap, woken = self._heap, self._woken
        push, next_seq = self._push, self._next_seq
        while True:
            while woken:
                r = woken.popleft()
                if not push(r, r.step(env._now, True)):
                    yield from self._sleep(env._now, URGENT)  # its refill first (see _sleep)
            sleep_s, priority = math.inf, NORMAL  # an empty heap: until kicked
            while heap:  # the segment ends due before any other scheduled event, in order
                e = heap[0]
                end_s = e.end_s
                if end_s > env._now and queue and end_s >= queue[0][0]:
                    sleep_s = end_s  # something else is scheduled first
                    break
                env._now = end_s  # nothing else is scheduled before it
                # ``step`` touches no heap entry (wakes queue up in ``woken``), so the
                # entry is still on top: it moves down once the next segment is planned
                r = e.replica
                end_s = r.step(end_s, False)
                if end_s is None:
                    push(r, None)
                    sleep_s, priority = env._now, URGENT
                    break
                e.end_s = end_s  # ``_push``, inlined: once per segment; later than before,
                e.seq = next_seq()  # so it can only move down (from where it is: the top)
                _sift_down(heap, e.pos)
                if woken:
                    sleep_s = None
                    break
            if sleep_s is not None:
                yield from self._sleep(sleep_s, priority)

    def _sleep(self, until_s: float, priority=NORMAL):
        """A process body: park until ``until_s`` (inf: until kicked), or until kicked.

        After handing a replica back, the decoder parks until now, urgently: the replica's
        process (interrupted just before, so first in line) goes idle and refills before the
        decoder touches any other replica, in the order the per-replica processes did it.
        """
        env = self.env
        ev = env.event()
        if until_s != math.inf:
            ev._ok, ev._value = True, None  # a timeout at exactly ``until_s``
            heappush(env._queue, (until_s, priority, next(env._eid), ev))
        self._parked, self._sleep_until_s = True, until_s
        with contextlib.suppress(simpy.Interrupt):
            yield ev
        self._parked = self._kicked = False
