"""Emulated machines: a Ray cluster of several "machines" on this one host, for tests and demos.

Each machine is a Ray node started with ``ray.cluster_utils.Cluster`` and has, like a real one:

- its own resources: ``num_gpus`` *fake* GPUs (Ray hands out their ids and sets
  ``CUDA_VISIBLE_DEVICES``; there is no device behind them, so nothing can run CUDA on them),
  ``num_cpus`` CPUs, and a custom resource ``machine-<name>: 1`` naming it;
- a node label ``laminar.machine=<name>`` (next to Ray's own ``ray.io/node-id``);
- its own filesystem roots: ``<root>/<name>/shm`` and ``<root>/<name>/tmp`` as
  ``LAMINAR_SHM_ROOT`` / ``LAMINAR_SCRATCH_ROOT`` / ``TMPDIR`` in its raylet's environment,
  inherited by every worker process it starts. :mod:`laminar.runtime.cluster.nodes` derives a run's
  node-local directories from them, so two "machines" never share a path by accident, and a
  path derived on the driver (or on another machine) is visibly wrong;
- with ``own_filesystems`` (default), no access to another machine's files: every Python process
  of a machine refuses to open, list, create, rename or remove anything under another machine's
  root or the driver's (``driver_root``, ``<root>/driver``: where a test puts the run directory
  of a driver that shares no filesystem with the machines), with ``PermissionError`` naming the
  machine (:mod:`laminar.runtime.cluster.fsguard`, installed as ``sitecustomize``). A path
  used on the wrong machine fails there, as it would on a real cluster.

Machine ``m0`` is the head node (Ray's GCS lives there, as on a real cluster); the driver that
created the cluster is on no machine in particular but shares the host. ``kill(name)`` removes a
node without a graceful shutdown, which is what a machine failure looks like to Ray (in-flight
calls to its actors raise ``ActorUnavailableError`` at once, ``ActorDiedError`` once the node is
declared dead, ~15 s later); the head cannot be killed. ``add_machine()`` brings up a new one
(a replacement machine).

Usage (``tests/runtime/conftest.py`` has a module-scoped fixture, ``machines``)::

    with EmulatedCluster(machines=2, gpus_per_machine=4) as emu:
        cfg.runtime.address = emu.address          # a `laminar train` run joins it
        ...                                        # or: emu.connect() -> ray.init here
        emu.kill("m1")                             # machine failure

Starting two machines takes ~3 s; each costs a raylet (~100 MB) plus its workers. Runs share one
cluster: each ``laminar train`` driver is its own Ray job, whose actors end with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laminar.runtime.cluster import fsguard
from laminar.runtime.cluster.nodes import SCRATCH_ROOT_ENV, SHM_ROOT_ENV
from laminar.runtime.cluster.procfs import shm_files_of

MACHINE_LABEL = "laminar.machine"
_QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


def machine_resource(name: str) -> str:
    """The custom resource that names machine ``name`` (1 unit on that node only)."""
    return f"machine-{name}"


@dataclass
class Machine:
    """One emulated machine (a Ray node) and its filesystem roots."""

    name: str
    node: Any  # ray._private.node.Node
    root: Path
    gpus: int
    cpus: int

    @property
    def node_id(self) -> str:
        return self.node.node_id

    @property
    def shm_root(self) -> Path:
        return self.root / "shm"

    @property
    def scratch_root(self) -> Path:
        return self.root / "tmp"

    def owns(self, path: str | Path) -> bool:
        """True when ``path`` lies under one of this machine's roots."""
        p = Path(path).resolve()
        return any(p.is_relative_to(r.resolve()) for r in (self.shm_root, self.scratch_root))


@dataclass
class EmulatedCluster:
    """``machines`` Ray nodes on this host (module docstring); a context manager."""

    machines: int = 2
    gpus_per_machine: int = 4
    cpus_per_machine: int = 2
    object_store_bytes: int = 100 * 1024**2
    own_filesystems: bool = True
    """Each machine's processes refuse other machines' (and the driver's) files (``fsguard``)."""
    nodes: dict[str, Machine] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.machines < 1:
            raise ValueError(f"machines must be >= 1, got {self.machines}")
        self._cluster: Any = None
        # Short: Ray's unix sockets live under it (a socket path may not pass 107 bytes).
        self.root = Path(tempfile.mkdtemp(prefix="lam-emu-", dir="/tmp"))
        self._saved_env: dict[str, str | None] = {}
        self._started = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> EmulatedCluster:
        """Start the head machine ``m0`` and the others; return self."""
        from ray.cluster_utils import Cluster

        (self.root / "ray").mkdir()
        self.driver_root.mkdir()
        hooks = self.root / "pyhooks"
        hooks.mkdir()
        source = Path(fsguard.__file__).read_text()
        (hooks / "sitecustomize.py").write_text(f"{source}\n\ninstall_from_env()\n")
        # Ray writes the cluster's address under $RAY_TMPDIR/ray; keep it out of /tmp/ray so
        # no one else's `ray.init("auto")` joins this cluster by accident.
        self._set_env({**_QUIET_ENV, "RAY_TMPDIR": str(self.root)})
        try:
            self._cluster = Cluster(
                initialize_head=True, head_node_args=self._node_args("m0", include_dashboard=False)
            )
            self._remember("m0", self._cluster.head_node)
            for _ in range(1, self.machines):
                self.add_machine()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __enter__(self) -> EmulatedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def driver_root(self) -> Path:
        """Files of the driver alone: no machine's process may touch them (``own_filesystems``);
        a run directory here is one the machines do not share."""
        return self.root / "driver"

    @property
    def address(self) -> str:
        """The GCS address to pass to ``ray.init`` / ``runtime.address``."""
        return self._cluster.address

    def connect(self) -> None:
        """``ray.init`` this process into the cluster (a driver of its own job)."""
        import ray

        ray.init(address=self.address, log_to_driver=False, logging_level="WARNING")

    def shutdown(self) -> None:
        """Disconnect this process if it is connected, stop every node, remove every root."""
        import ray

        with contextlib.suppress(Exception):
            if ray.is_initialized():
                ray.shutdown()
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.shutdown()
            self._cluster = None
        self.nodes.clear()
        shutil.rmtree(self.root, ignore_errors=True)
        for key, old in self._saved_env.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._saved_env = {}

    # -- machines -------------------------------------------------------------------------

    def add_machine(
        self, name: str = "", gpus: int | None = None, cpus: int | None = None
    ) -> Machine:
        """Start one more machine (default name ``m<k>``, default shape of the cluster)."""
        if not name:
            name = f"m{self._started}"  # never reuses a dead machine's name
        if name in self.nodes:
            raise ValueError(f"machine {name!r} exists")
        if name in ("driver", *fsguard.SHARED):
            raise ValueError(f"{name!r} names a shared root, not a machine")
        node = self._cluster.add_node(**self._node_args(name, gpus=gpus, cpus=cpus))
        return self._remember(name, node, gpus=gpus, cpus=cpus)

    def kill(self, name: str) -> Machine:
        """Machine failure: remove node ``name`` at once, without a graceful shutdown."""
        m = self.nodes.get(name)
        if m is None:
            raise KeyError(f"no machine {name!r} (have {sorted(self.nodes)})")
        if m.node is self._cluster.head_node:
            raise ValueError("the head machine (m0) holds Ray's GCS and cannot be killed")
        doomed = _process_tree(m.node)  # workers and what they started (vLLM engines)
        shm_files = _mapped_shm_files(doomed)
        for proc in doomed:  # at once, like a power cut; Ray alone lets workers linger
            with contextlib.suppress(Exception):
                proc.kill()
        self._cluster.remove_node(m.node, allow_graceful=False)
        del self.nodes[name]
        for path in shm_files:  # a dead machine's memory is gone with it
            with contextlib.suppress(OSError):
                os.unlink(path)
        shutil.rmtree(m.root, ignore_errors=True)
        return m

    def machine_of(self, node_id: str) -> Machine:
        """The machine a Ray node id belongs to."""
        for m in self.nodes.values():
            if m.node_id == node_id:
                return m
        raise KeyError(f"node {node_id} is none of {sorted(self.nodes)}")

    def owner_of(self, path: str | Path) -> Machine | None:
        """The machine whose roots hold ``path``, or None (a path on no machine)."""
        return next((m for m in self.nodes.values() if m.owns(path)), None)

    # -- internals ------------------------------------------------------------------------

    def _node_args(
        self, name: str, gpus: int | None = None, cpus: int | None = None, **extra: Any
    ) -> dict:
        root = self.root / name
        for sub in ("shm", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        guard = {}
        if self.own_filesystems:
            path = os.pathsep.join(p for p in (str(self.root / "pyhooks"),
                                               os.environ.get("PYTHONPATH", "")) if p)  # fmt: skip
            guard = {"PYTHONPATH": path, fsguard.ROOT_ENV: str(self.root),
                     fsguard.MACHINE_ENV: name}  # fmt: skip
        return dict(
            num_cpus=self.cpus_per_machine if cpus is None else cpus,
            num_gpus=self.gpus_per_machine if gpus is None else gpus,
            resources={machine_resource(name): 1},
            labels={MACHINE_LABEL: name},
            object_store_memory=self.object_store_bytes,
            temp_dir=str(self.root / "ray"),
            env_vars={
                **_QUIET_ENV,
                SHM_ROOT_ENV: str(root / "shm"),
                SCRATCH_ROOT_ENV: str(root / "tmp"),
                "TMPDIR": str(root / "tmp"),
                **guard,
            },
            **extra,
        )

    def _remember(
        self, name: str, node: Any, gpus: int | None = None, cpus: int | None = None
    ) -> Machine:
        m = Machine(
            name,
            node,
            self.root / name,
            self.gpus_per_machine if gpus is None else gpus,
            self.cpus_per_machine if cpus is None else cpus,
        )
        self.nodes[name] = m
        self._started += 1
        return m

    def _set_env(self, env: dict[str, str]) -> None:
        for key, value in env.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value


def _process_tree(node: Any) -> list[Any]:
    """Every process below a Ray node's raylet (its workers and their children)."""
    import psutil
    from ray._private import ray_constants

    procs = []
    for info in node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, []):
        with contextlib.suppress(psutil.Error):
            procs.extend(psutil.Process(info.process.pid).children(recursive=True))
    return procs


def _mapped_shm_files(procs: list[Any]) -> set[str]:
    """The /dev/shm files these processes map (vLLM's queues, relay stores)."""
    return set().union(*(shm_files_of(proc.pid) for proc in procs))
