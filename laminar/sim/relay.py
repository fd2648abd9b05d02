"""The relay tier in the simulator (paper §4): one relay per rollout machine, in a chain.

The trainer hands each new version to the master relay (the actor stall is charged by the
system, see ``laminar.sim.systems``); this process then broadcasts it down the chain in k
pipelined chunks. Relay i of the chain holds the version ``broadcast_time(i + 1, k, ...)``
seconds after the broadcast starts (``laminar.policy.relay``, App. D.2), so no event is needed
per relay: a rollout asks :meth:`version_at` for its relay's newest version when it frees up.
A version published while a broadcast is in flight waits for it; only the newest waiting one
is sent next.
"""

from __future__ import annotations

import simpy

from laminar.policy.relay import Chain, broadcast_time, optimal_chunks, plan_chain


class RelayChain:
    """Master relay plus one relay per rollout machine, and the broadcast process."""

    def __init__(self, cluster, machines: list[int]):
        self.env: simpy.Environment = cluster.env
        cost = cluster.cost
        self.nbytes = cost.weight_bytes
        self.alpha_s = cost.rdma_startup_s
        self.beta_s_per_byte = cost.rdma_beta_s_per_byte
        self.chunks = cluster.cfg.relay.chunks
        ids = [f"relay-{m}" for m in machines]
        self.set_chain(plan_chain(ids, ids[0]))
        self.broadcasts: list[tuple[int, float]] = [(0, float("-inf"))]  # (version, start)
        self.published: list[tuple[int, float]] = [(0, float("-inf"))]  # (version, time)
        self._pending: int | None = None
        # Relay faults (``laminar.sim.faults``): chain pauses while it is rebuilt, and dead
        # relays whose rollouts read from an upstream survivor until they come back.
        self.pauses: list[tuple[float, float]] = []  # (from, until)
        self.dead: list[tuple[int, float, float, float, int]] = []  # (pos, died, rebuilt, back, up)
        self._wake = self.env.event()
        self.env.process(self.run())

    def set_chain(self, chain: Chain) -> None:
        """Lay out a (new) chain: positions, chunk count k and arrival delays (§4.3: a chain
        rebuilt with ``laminar.policy.relay.rebuild_chain`` after a failure goes through here)."""
        self.chain = chain
        self.position = {int(node.removeprefix("relay-")): i for i, node in enumerate(chain.nodes)}
        p = chain.p
        self.k = self.chunks or optimal_chunks(p, self.nbytes, self.alpha_s, self.beta_s_per_byte)
        self.arrival_s = [self._time(i + 1) for i in range(p)]  # after the start, per position
        self.broadcast_s = self.arrival_s[-1]

    def _time(self, p: int) -> float:
        return broadcast_time(p, self.k, self.nbytes, self.alpha_s, self.beta_s_per_byte)

    def publish(self, version: int) -> None:
        """The master relay now holds ``version``; broadcast it when the chain is free."""
        self.published.append((version, self.env.now))
        self._pending = version
        if not self._wake.triggered:
            self._wake.succeed()

    def run(self):
        while True:
            yield self._wake
            self._wake = self.env.event()
            version, self._pending = self._pending, None
            self.broadcasts.append((version, self.env.now))
            yield self.env.timeout(self.broadcast_s)

    def position_of(self, machine: int) -> int:
        """Chain position of a machine's relay (0: the master)."""
        return self.position[machine]

    def version_at(self, position: int) -> int:
        """Newest version the relay at ``position`` holds now (through any relay fault)."""
        now = self.env.now
        for pos, died, rebuilt, back, up in self.dead:
            if pos == position and died <= now < back:
                # Frozen while the chain is rebuilt, then served by the upstream survivor.
                position, now = (pos, died) if now < rebuilt else (up, now)
        if position == 0:  # the master holds a version as soon as it is published
            return next(v for v, t in reversed(self.published) if t <= now)
        delay = self.arrival_s[position]
        for version, start in reversed(self.broadcasts):
            if self._arrives(start + delay) <= now:
                return version
        return 0

    def _arrives(self, t: float) -> float:
        """When a copy due at ``t`` arrives: a chain being rebuilt holds it until it is whole."""
        for start, until in self.pauses:
            if start <= t < until:
                t = until
        return t

    def fail(self, node: str, rebuilt: Chain | None, rebuild_s: float, recover_s: float) -> None:
        """§4.3: relay ``node`` died now; the chain becomes ``rebuilt`` within ``rebuild_s``
        and the node rejoins after ``recover_s``. Its rollouts read from the relay upstream of
        it (the new master, if it was the master) once the chain is rebuilt (``rebuilt`` None:
        no relay survives, nothing moves until it is back). The chain's
        changed length shifts arrival times by one chunk time; that is not modelled."""
        now = self.env.now
        pos = self.chain.nodes.index(node)
        if rebuilt is None:  # nothing survives: frozen until the relay is back
            up = pos
        else:
            alive = set(rebuilt.nodes)
            up = next((i for i in range(pos - 1, -1, -1) if self.chain.nodes[i] in alive), None)
            if up is None:  # the master died: its successor is the new master
                up = self.chain.nodes.index(rebuilt.master)
        self.pauses.append((now, now + rebuild_s))
        self.dead.append((pos, now, now + rebuild_s, now + max(recover_s, rebuild_s), up))

    def ready_s(self, position: int, version: int) -> float | None:
        """When the relay at ``position`` holds ``version`` or newer (None: not yet broadcast)."""
        if position == 0:
            return next((t for v, t in self.published if v >= version), None)
        delay = self.arrival_s[position]
        for v, start in self.broadcasts:
            if v >= version:
                return start + delay
        return None
