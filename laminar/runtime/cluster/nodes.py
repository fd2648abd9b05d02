"""Node-local paths: every path an actor uses is derived on its own machine, never on the driver's.

A run owns two directories *on every machine it touches*: ``<shm root>/laminar-<run id>``
(base model, weight versions, relay stores) and ``<scratch root>/laminar-<run id>`` (vLLM's
sockets, ``TMPDIR``; compile caches live across runs, :func:`cache_dir`). The roots are the
machine's own:

- ``LAMINAR_SHM_ROOT`` if set in the machine's environment, else ``/dev/shm`` (the temp dir
  where there is no ``/dev/shm``);
- ``LAMINAR_SCRATCH_ROOT`` if set, else the machine's temp dir.

On a real cluster nobody sets them (or ``ray start`` is run with them to move scratch to a
local disk); on emulated machines (:mod:`laminar.runtime.cluster.emulate`) each Ray node's raylet
gets
its own pair, which every worker it starts inherits, so "machines" on one host do not share
files by accident. The driver therefore hands actors a :class:`NodePath` (run id + which root +
a relative part), and the actor resolves it where it runs. :func:`enter_run` points this
process's scratch variables (``TMPDIR``, vLLM's socket and cache dirs) at the node's run dirs.

Cleaning up is node-side too: :func:`reap_on_node` kills a dead engine's processes and unlinks
its shared memory from a task on that engine's machine, and :func:`remove_run_everywhere` removes
a run's directories on every alive machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

SHM_ROOT_ENV = "LAMINAR_SHM_ROOT"
SCRATCH_ROOT_ENV = "LAMINAR_SCRATCH_ROOT"
CACHE_DIR_ENV = "LAMINAR_CACHE_DIR"
COMPILE_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT")
"""The variables :func:`compile_cache_env` sets: caches, not a run's files, that machines may
share (emulated machines on one host share the host's; real ones may share an NFS home)."""
Root = Literal["shm", "scratch"]


def cache_dir() -> Path | None:
    """Where this machine keeps compiled artefacts across runs (vLLM's model-inspection cache,
    torch inductor's kernels): ``LAMINAR_CACHE_DIR``, else ``$XDG_CACHE_HOME/laminar``, else
    ``~/.cache/laminar``; None when it cannot be made (each run then compiles into its own
    scratch directory, as every run did before: ~60 s more of an engine start on 2 cores,
    ``benchmarks/RESULTS.md``). Both caches are keyed by content and safe to share between
    processes and runs."""
    if os.environ.get(CACHE_DIR_ENV):
        where = Path(os.environ[CACHE_DIR_ENV]).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = Path(base) / "laminar"
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return where if os.access(where, os.W_OK | os.X_OK) else None


def compile_cache_env(scratch: Path) -> dict[str, str]:
    """``TORCHINDUCTOR_CACHE_DIR`` and ``VLLM_CACHE_ROOT``: in :func:`cache_dir` when there is
    one, else in the run's ``scratch`` directory."""
    shared = cache_dir()
    inductor, vllm = COMPILE_CACHE_VARS
    return {
        inductor: str(shared / "inductor" if shared else scratch / "inductor"),
        vllm: str(shared / "vllm" if shared else scratch / "vllm-cache"),
    }


def shm_root() -> Path:
    """This machine's shared-memory root (module docstring)."""
    if os.environ.get(SHM_ROOT_ENV):
        return Path(os.environ[SHM_ROOT_ENV])
    return Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def scratch_root() -> Path:
    """This machine's scratch root (module docstring)."""
    if os.environ.get(SCRATCH_ROOT_ENV):
        return Path(os.environ[SCRATCH_ROOT_ENV])
    return Path(tempfile.gettempdir())


def run_dir(run_id: str, root: Root) -> Path:
    """``<root>/laminar-<run_id>`` on this machine."""
    base = shm_root() if root == "shm" else scratch_root()
    return base / f"laminar-{run_id}"


@dataclass(frozen=True)
class NodePath:
    """A path inside a run's directory on *whichever machine resolves it*.

    It deliberately has no ``__fspath__``: handing one to code that expects a path fails loudly
    instead of silently meaning the driver's machine.
    """

    run_id: str
    root: Root
    rel: str = ""

    def __truediv__(self, part: str) -> NodePath:
        return NodePath(self.run_id, self.root, f"{self.rel}/{part}".strip("/"))

    def resolve(self) -> Path:
        """The path on this process's machine."""
        base = run_dir(self.run_id, self.root)
        return base / self.rel if self.rel else base


def local_path(path: str | Path | NodePath) -> Path:
    """A :class:`NodePath` resolved here; a plain path (a user's, e.g. a model dir) as is."""
    return path.resolve() if isinstance(path, NodePath) else Path(path)


def scratch_env(run_id: str) -> dict[str, str]:
    """Scratch variables of a process of run ``run_id`` on this machine (vLLM, torch, tempfile)."""
    tmp = run_dir(run_id, "scratch")
    return {
        # The roots, pinned as resolved now: with TMPDIR moved into the run's directory, this
        # process's and its children's run_dir() would otherwise point inside it (a note written
        # there, e.g. record_engine_shm's, is then not where the guardian or a --resume looks).
        SCRATCH_ROOT_ENV: str(scratch_root()),
        SHM_ROOT_ENV: str(shm_root()),
        "TMPDIR": str(tmp / "tmp"),  # vLLM's sockets, /tmp/vllm_dist_*
        "VLLM_RPC_BASE_PATH": str(tmp / "vllm-rpc"),
        **compile_cache_env(tmp),
    }


def enter_run(run_id: str) -> dict[str, str]:
    """Create this machine's run dirs and point this process's scratch variables into them.

    Call it first thing in an actor, before vLLM or torch are imported: the processes the actor
    starts (vLLM's EngineCore and workers) inherit the variables. Returns the variables set.
    """
    env = scratch_env(run_id)
    run_dir(run_id, "shm").mkdir(parents=True, exist_ok=True)
    for key in ("TMPDIR", "VLLM_RPC_BASE_PATH", "VLLM_CACHE_ROOT"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    tempfile.tempdir = None  # tempfile caches its directory: make it read TMPDIR again
    return env


ENGINE_SHM_DIR = "engine-shm"  # in the scratch dir: per rollout, the /dev/shm files its engine maps


def record_engine_shm(run_id: str, replica_id: str, paths: list[str]) -> None:
    """Note, in this machine's scratch dir of run ``run_id``, the shared-memory files that
    replica ``replica_id``'s engine maps (vLLM's message queues, ``/dev/shm/psm_*``, named at
    random, outside the run's directories). An engine killed with its driver (SIGKILL, no exit
    handlers) never unlinks them, and once its processes are gone nothing else names them:
    :func:`unlink_engine_shm` reads this note."""
    where = run_dir(run_id, "scratch") / ENGINE_SHM_DIR
    where.mkdir(parents=True, exist_ok=True)
    tmp = where / f".{replica_id}.tmp"
    tmp.write_text("\n".join(paths) + "\n")
    os.replace(tmp, where / f"{replica_id}.txt")


def unlink_engine_shm(run_id: str) -> list[str]:
    """Unlink the files :func:`record_engine_shm` noted for run ``run_id`` on this machine that
    still exist; returns them. Only names directly under ``/dev/shm`` are touched, whatever a
    note says."""
    removed = []
    for note in sorted((run_dir(run_id, "scratch") / ENGINE_SHM_DIR).glob("*.txt")):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for line in note.read_text().splitlines():
                path = Path(line)
                if path.parent != Path("/dev/shm") or path.name in ("", ".", ".."):
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    removed.append(str(path))
    return removed


def remove_run_here(run_id: str) -> list[str]:
    """Remove run ``run_id``'s directories on this machine, and the engine shared memory they
    note (:func:`unlink_engine_shm`); returns what existed."""
    removed = unlink_engine_shm(run_id)
    for root in ("shm", "scratch"):
        d = run_dir(run_id, root)  # type: ignore[arg-type]
        if d.exists():
            removed.append(str(d))
            shutil.rmtree(d, ignore_errors=True)
    return removed


def current_node() -> str:
    """This process's Ray node id ('' outside Ray)."""
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


def alive_nodes() -> list[str]:
    """Ids of the Ray nodes alive now, sorted."""
    import ray

    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])


def on_node(node_id: str, fn: Any, *args: Any, timeout_s: float = 60.0) -> Any:
    """Run ``fn(*args)`` in a task on machine ``node_id`` and return its result."""
    import ray

    return ray.get(submit_on_node(node_id, fn, *args), timeout=timeout_s)


def submit_on_node(node_id: str, fn: Any, *args: Any) -> Any:
    """Start ``fn(*args)`` in a task on machine ``node_id``; its object ref."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(fn).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    )
    return task.remote(*args)


def remove_run_everywhere(run_id: str, timeout_s: float = 60.0) -> dict[str, list[str]]:
    """Remove run ``run_id``'s directories on every alive machine (a task on each)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = alive_nodes()
    task = ray.remote(remove_run_here)
    refs = [
        task.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)
        ).remote(run_id)
        for n in nodes
    ]
    out: dict[str, list[str]] = {}
    for node, ref in zip(nodes, refs, strict=True):
        with contextlib.suppress(Exception):  # a machine that died meanwhile: nothing to clean
            out[node] = ray.get(ref, timeout=timeout_s)
    return out


def kill_here(footprint: dict) -> list[int]:
    """SIGKILL the processes of ``footprint`` that still run on *this* machine (only the very
    ones it recorded: pid and start time must match, so never a recycled pid); returns their
    pids. A pid means something only on the machine it was taken on."""
    import psutil

    killed = []
    for pid, created in footprint.get("pids", []):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.create_time() == created:
                proc.kill()
                killed.append(pid)
    return killed


def reap_here(footprint: dict) -> int:
    """Kill the processes a dead engine left on *this* machine (:func:`kill_here`) and unlink
    the shared-memory files they mapped, which no one else unlinks now. Returns the number of
    processes killed."""
    killed = len(kill_here(footprint))
    for path in footprint.get("shm", []):
        with contextlib.suppress(OSError):
            os.unlink(path)
    return killed


def reap_on_node(footprint: dict, timeout_s: float = 60.0, *, wait: bool = True) -> Any:
    """:func:`reap_here` on the machine the footprint was taken on (``footprint["node_id"]``).

    A footprint without a node is reaped here (a single-machine run); a machine that is gone
    took its processes and memory with it, so there is nothing left to reap. ``wait=False``:
    return the task's object ref at once (None when nothing was sent): a machine lost a moment
    ago is still alive to Ray, and a task there waits until Ray declares it dead (~15 s)."""
    node = footprint.get("node_id", "")
    if not node:
        return reap_here(footprint)
    if node not in alive_nodes():
        return 0 if wait else None
    if not wait:
        return submit_on_node(node, reap_here, footprint)
    return on_node(node, reap_here, footprint, timeout_s=timeout_s)


def resolve_on(node_id: str, path: NodePath, timeout_s: float = 60.0) -> Path:
    """Create ``path`` on machine ``node_id`` and return it as that machine names it."""
    return Path(on_node(node_id, _make_here, path, timeout_s=timeout_s))


def _make_here(path: NodePath) -> str:
    p = path.resolve()
    p.mkdir(parents=True, exist_ok=True)
    return str(p)


def node_of(handle: Any) -> str:
    """The Ray node an actor runs on."""
    import ray

    return ray.get(handle.__ray_call__.remote(lambda self: _node_id()))


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()
