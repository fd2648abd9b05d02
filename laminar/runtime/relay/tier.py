"""The relay tier on Ray: one ``RelayWorker`` actor per node, and the weight path over them.

:class:`RelayWeightPath` is both sides of the contract of :mod:`laminar.runtime.weights` in one
picklable object, like ``ShmWeightStore``: pass it to the trainer actor and to every rollout
actor. In the trainer's process its first ``publish`` starts the heartbeats and the publisher;
in a rollout's process ``latest`` reads the relay on that rollout's own node.
:func:`weight_path_for` picks it or the single-machine store from ``relay.enabled``.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

from laminar.config.policy import RelayConfig
from laminar.runtime.cluster.nodes import NodePath, local_path
from laminar.runtime.relay.node import RelayInfo
from laminar.runtime.relay.publisher import RelayError, RelayPublisher, RelaySource


def current_machine() -> str:
    """This process's machine: its Ray node id inside a Ray job, else the host name."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    return socket.gethostname()


class RelayWorker:
    """The relay on one machine (paper §4.2), as a Ray actor: weights in this node's /dev/shm."""

    def __init__(
        self, relay_id: str, root: str | NodePath, relay_cfg: dict, ports: tuple[int, int] = (0, 0)
    ):
        import ray

        from laminar.runtime.relay.host import RelayHost

        cfg = RelayConfig.model_validate(relay_cfg)
        self.host = RelayHost(
            relay_id,
            local_path(root),  # a NodePath: this machine's shared memory
            transport=cfg.transport,
            ucx_tls=cfg.ucx_tls,
            host=ray.util.get_node_ip_address(),
            machine=current_machine(),
            keep=cfg.keep_versions,
            ports=ports,
        )

    def info(self) -> dict:
        return self.host.info.to_json()

    def latest(self) -> tuple[int, str] | None:
        return self.host.store.latest()

    def stop(self) -> None:
        """Stop serving and free this relay's shared memory."""
        self.host.stop()


def start_relay_workers(
    relay_cfg: RelayConfig, shm_dir: str | Path | NodePath
) -> list[tuple[Any, RelayInfo]]:
    """One :class:`RelayWorker` on every alive Ray node, ``relay-0``.. in node-id order (ids
    that encode placement give ``plan_chain`` a stable order); returns (handle, info) pairs.
    ``shm_dir`` a :class:`NodePath`: each relay's store is on its own machine."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    handles = []
    for i, node_id in enumerate(nodes):
        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        actor = ray.remote(RelayWorker).options(
            num_cpus=0, scheduling_strategy=strategy, max_concurrency=4
        )
        rid = f"relay-{i}"
        root = shm_dir / rid if isinstance(shm_dir, NodePath) else str(Path(shm_dir) / rid)
        handles.append(actor.remote(rid, root, relay_cfg.model_dump()))
    infos = [RelayInfo.from_json(d) for d in ray.get([h.info.remote() for h in handles])]
    return list(zip(handles, infos, strict=True))


def start_relay_worker(relay_cfg: dict, info: RelayInfo, node_id: str) -> Any:
    """Restart a dead relay: same id, node, store and ports, so the relay manager's heartbeat
    finds it answering again and it rejoins the chain."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    actor = ray.remote(RelayWorker).options(
        num_cpus=0, scheduling_strategy=strategy, max_concurrency=4
    )
    return actor.remote(info.id, info.root, relay_cfg, (info.port, info.ctrl_port))


def stop_relay_workers(workers: list[tuple[Any, RelayInfo]]) -> None:
    """Stop every relay that still answers (freeing its shared memory), then kill the actors."""
    import ray

    for handle, _ in workers:
        with contextlib.suppress(Exception):  # a relay on a dead node: nothing to free
            ray.get(handle.stop.remote(), timeout=30)
        ray.kill(handle)


class RelayWeightPath:
    """``WeightPublisher`` and ``WeightSource`` over relay workers; picklable."""

    def __init__(self, relays: list[RelayInfo], relay_cfg: RelayConfig, config_json: str):
        self.relays = [r.to_json() for r in relays]
        self.relay_cfg = relay_cfg.model_dump()
        self.config_json = config_json
        self._publisher: RelayPublisher | None = None
        self._source: RelaySource | None = None

    def __getstate__(self) -> dict:
        skip = ("_publisher", "_source", "_workers")
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _publisher=None, _source=None, _workers=None)

    @property
    def publisher(self) -> RelayPublisher:
        """This process's publisher (created on first use, with its heartbeat thread)."""
        if self._publisher is None:
            from laminar.runtime.relay.manager import RelayManager

            cfg = RelayConfig.model_validate(self.relay_cfg)
            machine = current_machine()
            manager = RelayManager(
                [RelayInfo.from_json(r) for r in self.relays],
                trainer_machine=machine,
                heartbeat_s=cfg.heartbeat_s,
                misses=cfg.dead_after_beats,
            ).start()
            self._publisher = RelayPublisher(
                manager,
                config_json=self.config_json,
                machine=machine,
                transport=cfg.transport,
                ucx_tls=cfg.ucx_tls,
                chunks=cfg.chunks,
                alpha_s=cfg.alpha_s,
                link_bytes_per_s=cfg.link_bytes_per_s,
                min_chunk_bytes=cfg.min_chunk_bytes,
            )
        return self._publisher

    def publish(self, version: int, blob: bytes) -> None:
        self.publisher.publish(version, blob)

    def begin(self, version: int, nbytes: int) -> str:
        return self.publisher.begin(version, nbytes)

    def commit(self, version: int, path: str) -> None:
        self.publisher.commit(version, path)

    def latest(self) -> tuple[int, str] | None:
        if self._source is None:
            machine = current_machine()
            local = [r for r in self.relays if r["machine"] == machine]
            if not local:
                raise RelayError(f"no relay worker runs on this machine ({machine})")
            self._source = RelaySource(local[0]["root"])
        return self._source.latest()

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
            self._publisher = None


def weight_path_for(
    cfg: Any, shm_dir: str | Path | NodePath, config_json: str, *, store_dir: str | Path = ""
) -> tuple[Any, Any]:
    """The run's weight path and a function that tears it down.

    ``relay.enabled``: relay workers on every node and a :class:`RelayWeightPath`; otherwise the
    runtime's single-machine ``ShmWeightStore`` under ``shm_dir/weights`` (the default), or in
    ``store_dir``: a directory on the machine of the trainer and the rollouts."""
    if not cfg.relay.enabled:
        from laminar.runtime.weights import ShmWeightStore

        store = ShmWeightStore(store_dir or local_path(shm_dir) / "weights", config_json)
        return store, store.close
    relays = shm_dir / "relays" if isinstance(shm_dir, NodePath) else Path(shm_dir) / "relays"
    workers = start_relay_workers(cfg.relay, relays)
    path = RelayWeightPath([info for _, info in workers], cfg.relay, config_json)
    path._workers = workers  # the driver's copy only (not pickled): restarts replace entries

    def close() -> None:
        path.close()
        stop_relay_workers(workers)

    return path, close
