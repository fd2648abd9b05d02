"""Relay workers during ``laminar train``: kill one (``kill-relay``), see deaths, restart them.

A relay that dies is dropped from the chain by the trainer's relay manager
(``laminar.runtime.relay.manager``: heartbeats, then ``laminar.policy.relay.rebuild_chain``).
The driver sees the death too (its actor call fails) and starts a new relay worker on the same
node, at the same ports and over the same store, so the relay manager's heartbeat finds it
answering again and puts it back in the chain (``plan_chain`` under the current master); the
rollouts on that machine read the same store throughout.
"""

from __future__ import annotations

import time
from typing import Any

from laminar.runtime.faults.inject import FaultNotApplicable

RESTART_ATTEMPTS = 15  # starts of a dead relay's replacement on a live machine before giving up
RESTART_RETRY_S = 5.0  # between them: ~70 s in all, past the old connections' TIME_WAIT
PROBE_WAIT_S = 0.2  # a poll waits this long for fresh health probes, never for older ones


def relay_handles(store: Any) -> RelayFaults | None:
    """The run's relay workers, when its weight path is the relay tier."""
    workers = getattr(store, "_workers", None)
    return RelayFaults(store, workers) if workers else None


class RelayFaults:
    """The relay workers of one run, by relay id."""

    def __init__(self, store: Any, workers: list[tuple[Any, Any]]):
        self.store = store
        self.workers = workers  # the run's list, which teardown stops: restarts replace entries
        self.handles = {info.id: h for h, info in workers}
        self.infos = {info.id: info for _, info in workers}
        self.node = {info.id: info.machine for _, info in workers}
        self.restarting: dict[str, tuple[Any, Any]] = {}  # relay id -> (handle, info ref)
        self.failed_starts: dict[str, int] = {}  # relay id -> failed starts of its restart
        self.retry_at: dict[str, float] = {}  # relay id -> when to start it again (monotonic)
        self.probes: dict[str, Any] = {}  # relay id -> its pending health probe (info call)

    def kill(
        self, target: str | None, trainer_machine: str | None = None, lost: frozenset = frozenset()
    ) -> str:
        """Kill relay ``target`` (an id or an index), by default the last one that is not the
        master (the relay on the trainer's machine, which the trainer hands weights to) nor on
        a machine ``lost`` (killed, maybe not yet declared dead by Ray)."""
        import ray

        ids = sorted(self.handles)
        if target is not None:
            rid = target if target in self.handles else f"relay-{target}"
            if rid not in self.handles:
                raise FaultNotApplicable(f"no relay {target!r} (relays: {', '.join(ids)})")
        else:
            master_machine = trainer_machine or self._trainer_machine()
            # a relay being restarted, or on a machine already lost, is no longer there to kill
            others = [
                r
                for r in ids
                if self.node[r] != master_machine
                and r not in self.restarting
                and self.node[r] not in lost
                and _node_alive(self.node[r])
            ]
            if not others:
                raise FaultNotApplicable(
                    "only the master relay runs (one machine): kill-relay needs a relay on "
                    "another machine than the trainer (a multi-node run)"
                )
            rid = others[-1]
        ray.kill(self.handles[rid], no_restart=True)
        return rid

    def _trainer_machine(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def watch(self, sup: Any) -> bool:
        """Detect dead relays, restart them, and close their fault records; True on change."""
        import ray

        changed = False
        # A probe stays out until it answers: one to a relay on a machine just lost answers
        # only when Ray declares that machine dead (~15 s), and waiting for it here (this was
        # 2 s per poll) held the driver's loop: the next trainer step and the prompt budget.
        fresh = {rid: h.info.remote() for rid, h in self.handles.items() if rid not in self.probes}
        self.probes.update(fresh)
        refs = list(self.probes.values())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PROBE_WAIT_S if fresh else 0)
        for rid, ref in list(self.probes.items()):
            if ref not in ready:
                continue
            del self.probes[rid]
            if rid in self.restarting or rid in self.retry_at or rid not in self.handles:
                continue
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                self._restart(rid, sup)
                changed = True
        for rid, (handle, info_ref) in list(self.restarting.items()):
            done, _ = ray.wait([info_ref], timeout=0)
            if done:
                del self.restarting[rid]
                try:
                    ray.get(info_ref)
                except ray.exceptions.RayError as e:
                    tries = self.failed_starts[rid] = self.failed_starts.get(rid, 0) + 1
                    self._note(sup, rid, f"{type(e).__name__}: ...{str(e)[-300:]}")
                    if tries < RESTART_ATTEMPTS and _node_alive(self.node[rid]):
                        # its ports are not free yet (ucxx: "Device is busy" while the old
                        # connections linger): a new start a little later
                        self.retry_at[rid] = time.monotonic() + RESTART_RETRY_S
                        continue
                    del self.handles[rid]  # its machine went meanwhile: no relay there
                    self._close_record(sup, rid, restarted=False)
                    changed = True
                    continue
                self.handles[rid] = handle
                i = next(i for i, (_, info) in enumerate(self.workers) if info.id == rid)
                self.workers[i] = (handle, self.infos[rid])
                self._close_record(sup, rid)
                changed = True
        for rid, at in list(self.retry_at.items()):
            if time.monotonic() >= at:
                del self.retry_at[rid]
                self._start(rid)
        return changed

    def _restart(self, rid: str, sup: Any) -> None:
        now = sup.now_s()
        rec = sup._open_record("kill-relay", rid) or sup._record(
            {"kind": "relay-death", "target": rid, "at_s": now, "step": sup.last_step}
        )
        rec.update(detected_s=now, detection_s=now - rec["at_s"], restart_t=time.perf_counter())
        if not _node_alive(self.node[rid]):  # its machine is gone: the chain goes on without it
            del self.handles[rid]
            rec.pop("restart_t")
            rec.update(open=False, restarted=False)
            return
        self.failed_starts[rid] = 0
        self._start(rid)

    def _start(self, rid: str) -> None:
        from laminar.runtime.relay.tier import start_relay_worker

        handle = start_relay_worker(self.store.relay_cfg, self.infos[rid], self.node[rid])
        self.restarting[rid] = (handle, handle.info.remote())

    def _note(self, sup: Any, rid: str, error: str) -> None:
        """A failed start of relay ``rid``'s replacement, on its open record."""
        for rec in sup.faults:
            if rec.get("target") == rid and rec.get("open") and "restart_t" in rec:
                rec.setdefault("restart_errors", []).append(error)

    def _close_record(self, sup: Any, rid: str, restarted: bool = True) -> None:
        for rec in sup.faults:
            if rec.get("target") == rid and rec.get("open") and "restart_t" in rec:
                took_s = time.perf_counter() - rec.pop("restart_t")
                if restarted:
                    rec["recovery_s"] = took_s
                rec.update(open=False, restarted=restarted)


def _node_alive(node_id: str) -> bool:
    import ray

    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())
