"""Who is in the relay tier, who is alive, and in what order they pass weights (paper §4.3).

The manager lives beside the publisher (in the trainer's process). It pings every relay's
control port each ``heartbeat_s``; a relay whose port refuses (its process is gone) is dead at
once, one that stays silent for ``misses`` beats is dead then. The chain comes from
``laminar.policy.relay``: ``choose_master`` + ``plan_chain`` at the start, ``rebuild_chain``
after each death, which also elects the new master when the master died; the publisher is
told through ``on_master_change`` and sends to the new master from then on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from laminar.policy.relay import Chain, choose_master, plan_chain, rebuild_chain
from laminar.runtime.relay.control import ControlClient, ControlError
from laminar.runtime.relay.node import RelayInfo


class RelayManager:
    """Membership, heartbeats and the chain of a set of relays."""

    def __init__(
        self,
        relays: list[RelayInfo],
        *,
        trainer_machine: str = "",
        heartbeat_s: float = 0.2,
        misses: int = 3,
        on_master_change: Callable[[RelayInfo], None] | None = None,
    ):
        if not relays:
            raise ValueError("the relay tier needs at least one relay")
        self.relays = {r.id: r for r in relays}
        self.heartbeat_s = heartbeat_s
        self.misses = misses
        self.on_master_change = on_master_change
        master = choose_master({r.id: r.machine for r in relays}, trainer_machine)
        self._chain = plan_chain(self.relays, master)
        self.dead: dict[str, float] = {}  # id -> monotonic time it was declared dead
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._clients = {
            r.id: ControlClient(r.host, r.ctrl_port, timeout_s=heartbeat_s) for r in relays
        }
        self._missed = dict.fromkeys(self.relays, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def chain(self) -> Chain:
        with self._lock:
            return self._chain

    def master(self) -> RelayInfo:
        """The relay the trainer hands weights to."""
        return self.relays[self.chain.master]

    def chain_infos(self) -> list[RelayInfo]:
        """The live relays in chain order, master first."""
        return [self.relays[i] for i in self.chain.nodes]

    def start(self) -> RelayManager:
        """Start the heartbeat thread."""
        self._thread = threading.Thread(target=self._run, name="relay-heartbeats", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        for c in self._clients.values():
            c.close()

    def report_dead(self, relay_ids: set[str], reason: str) -> None:
        """Drop relays (seen dead by a heartbeat or by a failed request) and rebuild the chain."""
        with self._lock:
            fresh = {i for i in relay_ids if i in self._chain.nodes}
            if not fresh:
                return
            old_master = self._chain.master
            self._chain = rebuild_chain(self._chain, fresh)
            now = time.monotonic()
            for i in fresh:
                self.dead[i] = now
            new_master = self._chain.master
            self.events.append(
                {
                    "dead": sorted(fresh),
                    "reason": reason,
                    "t": now,
                    "master": new_master,
                    "chain": list(self._chain.nodes),
                }
            )
        if new_master != old_master and self.on_master_change is not None:
            self.on_master_change(self.relays[new_master])

    def _run(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self.beat()

    def beat(self) -> None:
        """Ping every live relay once; declare dead those that refuse or missed too many; take
        back those declared dead that answer again."""
        dead = {i for i in self.chain.nodes if not self._ping(i)}
        if dead and len(dead) < len(self.chain.nodes):  # never drop the last relay standing
            self.report_dead(dead, "heartbeat")
        back = {i for i in list(self.dead) if self._answers(i)}
        if back:
            self.rejoin(back)

    def rejoin(self, relay_ids: set[str]) -> None:
        """Relays declared dead that answer again (a false alarm on an overloaded machine, or a
        process restarted at the same address) go back into the chain: ``plan_chain`` over the
        live relays, under the current master (the trainer keeps its address)."""
        with self._lock:
            back = {i for i in relay_ids if i in self.dead}
            if not back:
                return
            for i in back:
                self.dead.pop(i)
                self._missed[i] = 0
            self._chain = plan_chain(set(self._chain.nodes) | back, self._chain.master)
            self.events.append(
                {"rejoined": sorted(back), "t": time.monotonic(), "chain": list(self._chain.nodes)}
            )

    def _answers(self, relay_id: str) -> bool:
        try:
            self._clients[relay_id].request({"op": "ping"}, timeout_s=self.heartbeat_s)
            return True
        except ControlError:
            return False

    def _ping(self, relay_id: str) -> bool:
        """False when ``relay_id`` is dead: its port refuses (a closed connection is retried at
        once, to tell a killed process from a dropped socket), or it missed ``misses`` beats."""
        for _ in range(2):
            try:
                self._clients[relay_id].request({"op": "ping"}, timeout_s=self.heartbeat_s)
                self._missed[relay_id] = 0
                return True
            except ControlError as e:
                if isinstance(e.__cause__, ConnectionRefusedError):
                    return False
                if isinstance(e.__cause__, TimeoutError):
                    break
        self._missed[relay_id] += 1
        return self._missed[relay_id] < self.misses
