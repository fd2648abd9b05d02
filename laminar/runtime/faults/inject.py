"""Carry out one injected fault on a running job (``laminar train --fault KIND@WHEN``).

Each function kills something the way it dies in production and returns what was killed; the
:class:`laminar.runtime.faults.supervisor.Supervisor` then times detection and recovery.

- ``kill-rollout``: the rollout actor process (SIGKILL through Ray); its engine's processes
  die with it (``laminar.runtime.cluster.lifeline``), and are reaped again all the same;
- ``kill-engine``: the engine's processes (vLLM EngineCore and workers), the actor stays (the
  actor kills them: it is on their machine);
- ``kill-machine``: a Ray node of the emulated cluster, with its rollouts and relay;
- ``kill-relay``: one relay worker (the tier must be on: ``relay.enabled``);
- ``kill-trainer``: the trainer actor, wherever it is in its step.
"""

from __future__ import annotations

import contextlib
from typing import Any

from laminar.config.runtime_faults import FaultSpec

ENGINE_KILL_TIMEOUT_S = 10.0  # a rollout actor that does not answer by then: the fallback


class FaultNotApplicable(RuntimeError):
    """The fault cannot be carried out on this run now (no such target, nothing left)."""


class FaultDeferred(FaultNotApplicable):
    """Not now, maybe soon: e.g. a replacement rollout is still starting."""


def choose_rollout(a: Any, target: str | None) -> str:
    """The target rollout, or the last healthy one. Rollouts already hit by a fault whose
    recovery is not over are not chosen again. The last healthy rollout is chosen only when
    dead rollouts are replaced (``runtime.faults.replace_dead``): the run then waits for a
    replacement, its trajectories kept in the partial pool meanwhile."""
    live = [rid for rid in a.live() if rid not in hit_by_open_faults(a)]
    if target is not None:
        if target not in live:
            raise FaultNotApplicable(f"no healthy rollout {target!r} (healthy: {live})")
        return target
    if not live:
        raise FaultDeferred("no healthy rollout now (replacements still starting)")
    if len(live) < 2 and not a.info.get("replace_dead", False):
        raise FaultNotApplicable(
            "one healthy rollout left and runtime.faults.replace_dead is off: killing it would "
            "stop the run"
        )
    return live[-1]


def hit_by_open_faults(a: Any) -> set[str]:
    """Rollouts hit by a fault whose recovery is not over (a lost machine's included)."""
    hit: set[str] = set()
    for f in a.info.get("faults", []):
        if f.get("open"):
            hit.update([f.get("target"), *f.get("rollouts", ())])
    return hit


def kill_rollout(a: Any, target: str | None) -> dict:
    import ray

    rid = choose_rollout(a, target)
    ray.kill(a.rollouts[rid], no_restart=True)
    return {"target": rid}


def kill_engine(a: Any, target: str | None) -> dict:
    """SIGKILL the engine processes a rollout started: through the rollout actor itself, which
    lives on the engine's machine (``RolloutWorker.kill_engine``); only when the actor cannot
    be asked (it is stuck, or predates that method) from the driver by the pids recorded at its
    start-up, which works only when the driver shares the engine's host."""
    import ray

    rid = choose_rollout(a, target)
    try:
        ref = a.rollouts[rid].kill_engine.remote()
        killed, via = ray.get(ref, timeout=ENGINE_KILL_TIMEOUT_S), "actor"
    except (ray.exceptions.RayError, AttributeError):
        killed, via = kill_from_driver(a.procs.get(rid, {})), "driver"
    if not killed:
        raise FaultNotApplicable(f"rollout {rid} has no engine process left to kill")
    return {"target": rid, "pids": killed, "via": via}


def kill_from_driver(footprint: dict) -> list[int]:
    """The fallback of :func:`kill_engine`: the footprint's processes, killed from here."""
    from laminar.runtime.cluster.nodes import kill_here

    return kill_here(footprint)


def reap(a: Any, rid: str, *, wait: bool = True) -> Any:
    """Kill what a dead rollout's engine left on its machine (its processes, by pid and start
    time, so never a recycled pid) and unlink the shared-memory files they mapped: a task on
    that machine does it (``laminar.runtime.cluster.nodes.reap_on_node``). ``wait=False``: the
    task's ref, not waited for (None: nothing sent)."""
    from laminar.runtime.cluster.nodes import reap_on_node

    with contextlib.suppress(Exception):  # cleanup must not fail the run's teardown
        return reap_on_node(a.procs.get(rid, {}), wait=wait)
    return None


def kill_trainer(a: Any, target: str | None) -> dict:
    import ray

    ray.kill(a.trainer, no_restart=True)
    return {"target": "trainer"}


def kill_relay(a: Any, target: str | None) -> dict:
    relays = getattr(a, "relays", None)
    if relays is None:
        raise FaultNotApplicable("kill-relay needs the relay tier (relay.enabled=true)")
    from laminar.runtime.cluster.nodes import node_of

    faults = a.info.get("faults", [])
    lost = frozenset(f.get("node_id") for f in faults if f["kind"] == "kill-machine")
    return {"target": relays.kill(target, trainer_machine=node_of(a.trainer), lost=lost)}


def kill_machine(a: Any, target: str | None) -> dict:
    machines = getattr(a, "machines", None)
    if machines is None:
        raise FaultNotApplicable("kill-machine needs emulated machines (a multi-node cluster)")
    return machines.kill(target, a)


KILLERS = {
    "kill-rollout": kill_rollout,
    "kill-engine": kill_engine,
    "kill-machine": kill_machine,
    "kill-relay": kill_relay,
    "kill-trainer": kill_trainer,
}


def inject(a: Any, spec: FaultSpec) -> dict:
    """Carry out ``spec``; raises :class:`FaultNotApplicable` when it cannot be."""
    return KILLERS[spec.kind](a, spec.target)
