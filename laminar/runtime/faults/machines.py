"""Machine failures (``kill-machine``) on an emulated cluster: several Ray nodes on one host.

``laminar.runtime.cluster.emulate.EmulatedCluster`` starts the nodes; a process that holds one
registers it here (:func:`register`), and a run joining that cluster (``runtime.address``)
finds it and can remove a node without a graceful shutdown, which is what a machine failure
looks like to Ray. The rollouts on that node are then seen dead by the rollout manager (their
calls fail within seconds), recovered and replaced elsewhere when resources allow; its relay
is dropped from the chain by the relay manager's heartbeats.
"""

from __future__ import annotations

from typing import Any

from laminar.runtime.faults.inject import FaultDeferred, FaultNotApplicable, hit_by_open_faults

_CLUSTERS: dict[str, Any] = {}


def register(cluster: Any) -> None:
    """Let runs that join ``cluster.address`` kill its machines."""
    _CLUSTERS[cluster.address] = cluster


def unregister(cluster: Any) -> None:
    _CLUSTERS.pop(cluster.address, None)


def machines_for(address: str) -> MachineFaults | None:
    cluster = _CLUSTERS.get(address) if address else None
    return MachineFaults(cluster) if cluster is not None else None


class MachineFaults:
    """Kill a machine of an emulated cluster, with what ran on it."""

    def __init__(self, cluster: Any):
        self.cluster = cluster

    def kill(self, target: str | None, a: Any) -> dict:
        """Kill machine ``target`` (a name such as ``m1``), by default the last one but Ray's
        head (it holds Ray's own state) with a healthy rollout; the trainer, a relay, anything
        else on it dies with it. Returns the record."""
        from laminar.runtime.cluster.nodes import node_of

        head = self.cluster.nodes.get("m0")
        # Ray's head holds Ray's own state; the data tier (pools, manager) is the run's ledger,
        # which the paper keeps on reliable machines: neither is a machine to lose here.
        spared = {head.node_id if head is not None else None}
        spared |= {node_of(h) for h in (a.prompts, a.partial, a.buffer, a.manager)}
        hit = hit_by_open_faults(a)
        where = {rid: _node_of(h) for rid, h in a.live().items() if rid not in hit}
        names = {m.node_id: name for name, m in self.cluster.nodes.items()}
        if target is None:
            candidates = {names[n] for n in where.values() if n not in spared and n in names}
            if not candidates:  # e.g. the rollouts elsewhere are still being replaced
                seen = {rid: names.get(n or "", n) for rid, n in where.items()}
                kept = sorted(names.get(n or "", str(n)) for n in spared)
                raise FaultDeferred(
                    "no machine with a healthy rollout can be lost now (healthy rollouts on: "
                    f"{seen}; spared: {kept})"
                )
            target = sorted(candidates)[-1]
        m = self.cluster.nodes.get(target)
        if m is None:
            raise FaultNotApplicable(f"no machine {target!r} (have {sorted(self.cluster.nodes)})")
        if m.node_id in spared:
            raise FaultNotApplicable(f"machine {target} holds Ray's head or the run's pools")
        rollouts = sorted(rid for rid, n in where.items() if n == m.node_id)
        trainer_there = _node_of(a.trainer) == m.node_id  # None: it is dead already
        self.cluster.kill(target)
        # Its record stays open until its rollouts' deaths are seen; without rollouts there is
        # nothing of its own to wait for (a trainer or relay on it gets a record of its own).
        return {"target": target, "rollouts": rollouts, "node_id": m.node_id,
                "trainer_too": trainer_there, "open": bool(rollouts)}  # fmt: skip


def _node_of(handle: Any) -> str | None:
    """The actor's machine, None when it is dead (killed, or on a machine being lost)."""
    import ray

    from laminar.runtime.cluster.nodes import node_of

    try:
        return node_of(handle)
    except ray.exceptions.RayError:
        return None
