"""Where a run's trainer checkpoints and final model go (``runtime.storage``): a path every
machine sees, checked at start, or the driver's run directory, reached through Ray in bounded
chunks.

Three kinds (:meth:`Storage.for_run`):

- ``shared`` (``runtime.storage: /path``): the trainer's ranks write checkpoints under
  ``<path>/<run key>/step-NNNNNN`` and the final model under ``<path>/<run key>/model``; the run
  directory's checkpoint records where (``meta.json``: ``trainer_dir``), the final model is moved
  into the run directory. At start every alive machine writes a probe file there and the driver
  reads them all back (:func:`check_shared`): a machine that cannot see the path fails the run,
  named.
- ``driver`` (no ``runtime.storage``, a cluster joined with ``runtime.address``): no filesystem
  is shared. Each rank writes its checkpoint shards into its own machine's scratch
  (a :class:`~laminar.runtime.cluster.nodes.NodePath`), and the driver pulls every machine's
  files into the run directory (:func:`pull_tree`), ``CHUNK_BYTES`` per Ray task with at most
  ``WINDOW`` chunks in flight, so memory stays bounded whatever the model's size; the scratch
  copies are removed at once (nothing piles up on the trainer's disk). A restarted trainer or a
  ``--resume`` gets the checkpoint pushed back the same way onto each of its machines
  (:func:`push_tree`), loads it, and the copies go. The final model travels like a checkpoint.
- ``local`` (no ``runtime.storage``, a local Ray): one machine; the trainer writes into the run
  directory itself.

Checkpoints are pruned to ``runtime.keep_checkpoints`` (:func:`prune_steps`), in the run
directory and under a shared path alike.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from laminar.errors import LaminarError
from laminar.runtime.cluster import nodes
from laminar.runtime.cluster.nodes import NodePath, local_path

MiB = 1024 * 1024
CHUNK_BYTES = 8 * MiB  # one Ray task's bytes
WINDOW = 4  # chunks in flight: the driver holds at most WINDOW x CHUNK_BYTES
PROBE_PREFIX = ".laminar-probe-"
TIMEOUT_S = 600.0

Submit = Callable[..., Any]
"""``submit(fn, *args)``: start ``fn(*args)`` where the files are; a handle for ``get``."""
Get = Callable[[Any], Any]


class StorageError(LaminarError):
    """Checkpoint storage that does not work (a machine that cannot see it, a bad transfer)."""


# -- node side: plain file operations, run in a task on the machine that holds the files ----


def list_files(root: str | NodePath) -> list[tuple[str, int]]:
    """Every file under ``root`` (hidden ones too) as (relative POSIX path, size), sorted; none
    when ``root`` does not exist."""
    base = local_path(root)
    out = []
    for d, _, files in os.walk(base):
        for name in files:
            p = Path(d) / name
            out.append((p.relative_to(base).as_posix(), p.stat().st_size))
    return sorted(out)


def read_chunk(root: str | NodePath, rel: str, offset: int, size: int) -> bytes:
    """At most ``size`` bytes of ``root/rel`` from ``offset``."""
    with open(local_path(root) / _safe(rel), "rb") as f:
        f.seek(offset)
        return f.read(size)


def write_chunk(root: str | NodePath, rel: str, offset: int, data: bytes) -> int:
    """Write ``data`` at ``offset`` of ``root/rel`` (created with its directories)."""
    path = local_path(root) / _safe(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.seek(offset)
        return f.write(data)


def remove_tree(root: str | NodePath) -> bool:
    """Remove ``root``; True if it existed."""
    path = local_path(root)
    existed = path.exists()
    shutil.rmtree(path, ignore_errors=True)
    return existed


def write_probe(directory: str, name: str, text: str) -> str:
    """Write the probe file ``directory/name``; '' or what went wrong."""
    try:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return ""


def _safe(rel: str) -> str:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise StorageError(f"{rel!r} is not a path inside a checkpoint")
    return rel


# -- transfer: through any submit/get (Ray tasks on a machine; plain calls in tests) ---------


def _in_order(submit: Submit, get: Get, calls: Iterable[tuple], window: int) -> Iterator[Any]:
    """Results of ``submit(*call)`` for each call, in order, at most ``window`` in flight."""
    pending: deque = deque()
    for call in calls:
        if len(pending) >= window:
            yield get(pending.popleft())
        pending.append(submit(*call))
    while pending:
        yield get(pending.popleft())


def pull_tree(
    submit: Submit,
    get: Get,
    src: str | NodePath,
    dst: Path,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    window: int = WINDOW,
    taken: set[str] | None = None,
) -> dict[str, int]:
    """Copy every file under ``src`` (where ``submit`` runs) into ``dst`` (here), chunk by
    chunk; returns {relative path: size}. ``taken``: paths already copied from another machine
    (the same path twice is an error: two machines' shards would collide)."""
    files = get(submit(list_files, src))
    taken = set() if taken is None else taken
    for rel, size in files:
        if rel in taken:
            raise StorageError(f"{rel} is on two of the trainer's machines")
        taken.add(rel)
        target = dst / _safe(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        calls = ((read_chunk, src, rel, off, chunk_bytes) for off in range(0, size, chunk_bytes))
        written = 0
        with open(target, "wb") as f:
            for data in _in_order(submit, get, calls, window):
                written += f.write(data)
        if written != size:
            raise StorageError(f"{rel}: {written} bytes came of {size} (changed while read?)")
    return dict(files)


def push_tree(
    submit: Submit,
    get: Get,
    src: Path,
    dst: str | NodePath,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    window: int = WINDOW,
) -> dict[str, int]:
    """Copy every file under ``src`` (here) to ``dst`` (where ``submit`` runs), chunk by chunk;
    returns {relative path: size}."""
    files = list_files(src)

    def calls() -> Iterator[tuple]:
        for rel, size in files:
            with open(src / rel, "rb") as f:
                for off in range(0, max(size, 1), chunk_bytes):
                    yield (write_chunk, dst, rel, off, f.read(chunk_bytes))

    for _ in _in_order(submit, get, calls(), window):
        pass
    return dict(files)


def on_machine(node_id: str) -> tuple[Submit, Get]:
    """``submit``/``get`` for Ray tasks on machine ``node_id``."""
    import ray

    def submit(fn: Any, *args: Any) -> Any:
        return nodes.submit_on_node(node_id, fn, *args)

    return submit, lambda ref: ray.get(ref, timeout=TIMEOUT_S)


# -- pruning ---------------------------------------------------------------------------------


def prune_steps(root: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` ``step-NNNNNN`` directories under ``root``; returns
    what went."""
    steps = sorted(p for p in root.glob("step-*") if p.name[5:].isdigit())
    gone = steps[:-keep] if keep > 0 else steps
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


# -- the shared path's check -----------------------------------------------------------------


def describe_node(node_id: str) -> str:
    """A machine as a person finds it: its emulated name or host name, address and node id."""
    import ray

    for n in ray.nodes():
        if n["NodeID"] == node_id:
            name = (n.get("Labels") or {}).get("laminar.machine") or n.get("NodeName", "")
            return f"machine {name} ({n.get('NodeManagerAddress', '?')}, Ray node {node_id[:12]})"
    return f"Ray node {node_id[:12]}"


def check_shared(
    path: Path,
    machines: list[str],
    submit_on: Callable[[str], tuple[Submit, Get]] = on_machine,
    describe: Callable[[str], str] = describe_node,
) -> None:
    """Every machine of ``machines`` writes a probe file under ``path`` and this process (the
    driver) reads each back; a StorageError naming the first machine that cannot see it."""
    token = uuid.uuid4().hex
    probe = path / f"{PROBE_PREFIX}{token[:12]}"
    try:
        probe.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(
            f"runtime.storage: the driver's machine cannot create {probe} ({e})"
        ) from None
    try:
        sent = []
        for node in machines:
            submit, get = submit_on(node)
            sent.append((node, get, submit(write_probe, str(probe), node, f"{node} {token}")))
        for node, get, handle in sent:
            error = get(handle)
            who = describe(node)
            if error:
                raise StorageError(f"runtime.storage: {who} cannot write to {path}: {error}")
            try:
                seen = (probe / node).read_text()
            except OSError:
                seen = ""
            if seen != f"{node} {token}":
                raise StorageError(
                    f"runtime.storage: {who} does not see {path} as the driver does (its probe "
                    f"file is not there for the driver): {path} must be one filesystem mounted at "
                    "that path on every machine, or leave runtime.storage unset"
                )
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# -- a run's storage -------------------------------------------------------------------------


def run_key(run_dir: Path) -> str:
    """A run directory's own folder under a shared path: its name and a hash of where it is."""
    where = str(Path(run_dir).resolve())
    return f"{Path(run_dir).name}-{hashlib.sha256(where.encode()).hexdigest()[:10]}"


@dataclass
class Storage:
    """One run's checkpoint and final-model storage (module docstring)."""

    kind: Literal["local", "shared", "driver"]
    root: Path | None = None
    """shared: the run's folder under ``runtime.storage``."""
    stage: NodePath | None = None
    """driver: the trainer machines' scratch for what travels."""
    chunk_bytes: int = CHUNK_BYTES
    window: int = WINDOW

    @classmethod
    def for_run(cls, cfg: Any, stage: NodePath, run_dir: Path | None) -> Storage:
        """The kind ``cfg`` asks for; a shared path is checked on every alive machine."""
        rt = cfg.runtime
        if rt.storage:
            check_shared(Path(rt.storage), nodes.alive_nodes())
            key = run_key(run_dir) if run_dir is not None else f"run-{uuid.uuid4().hex[:10]}"
            return cls("shared", root=Path(rt.storage) / key)
        if not rt.address:
            return cls("local")
        return cls("driver", stage=stage)

    # -- checkpoints ---------------------------------------------------------------------

    def trainer_target(self, step: int, tmp: Path) -> str | NodePath:
        """Where the trainer writes step ``step``'s state (``tmp``: the run checkpoint being
        written in the run directory)."""
        if self.kind == "shared":
            assert self.root is not None
            return str(self.root / f"step-{step:06d}")
        if self.kind == "driver":
            assert self.stage is not None
            return self.stage / f"out-{step:06d}-{uuid.uuid4().hex[:8]}"
        return str(tmp / "trainer")

    def collect(self, trainer: Any, target: str | NodePath, tmp: Path) -> dict:
        """After the trainer saved into ``target``: what ``meta.json`` records (shared: where
        the state is) or, for ``driver``, the state pulled into ``tmp/trainer`` and removed
        from the trainer's machines."""
        if self.kind == "shared":
            return {"trainer_dir": str(target)}
        if self.kind == "driver":
            assert isinstance(target, NodePath)
            machines = _rank_machines(trainer)
            try:
                taken: set[str] = set()
                for node in machines:
                    submit, get = on_machine(node)
                    pull_tree(submit, get, target, tmp / "trainer", chunk_bytes=self.chunk_bytes,
                              window=self.window, taken=taken)  # fmt: skip
            finally:
                _remove_on(machines, target)
        return {}

    def prune(self, kept: list[str]) -> None:
        """Shared: remove trainer states of steps no longer kept (``kept``: step names)."""
        if self.kind != "shared" or self.root is None or not self.root.exists():
            return
        for p in self.root.glob("step-*"):
            if p.name not in kept:
                shutil.rmtree(p, ignore_errors=True)

    @contextlib.contextmanager
    def staged(self, trainer: Any, checkpoint: str | None) -> Iterator[str | NodePath | None]:
        """What ``trainer`` loads ``checkpoint`` (a path the driver sees) from: the path itself,
        or (``driver``) a copy pushed onto each of its machines, removed after."""
        if self.kind != "driver" or not checkpoint:
            yield checkpoint
            return
        assert self.stage is not None
        where = self.stage / f"in-{uuid.uuid4().hex[:8]}"
        machines = _rank_machines(trainer)
        try:
            for node in machines:
                submit, get = on_machine(node)
                push_tree(submit, get, Path(checkpoint), where, chunk_bytes=self.chunk_bytes,
                          window=self.window)  # fmt: skip
            yield where
        finally:
            _remove_on(machines, where)

    # -- the final model -----------------------------------------------------------------

    def save_model(self, trainer: Any, model_out: str) -> str:
        """The trainer's final policy as a Hugging Face directory at ``model_out`` (here)."""
        if self.kind == "local":
            return _wait(trainer.save_model.remote(model_out))
        out = Path(model_out)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if self.kind == "shared":
            assert self.root is not None
            src = self.root / "model"
            shutil.rmtree(src, ignore_errors=True)
            _wait(trainer.save_model.remote(str(src)))
            shutil.move(str(src), tmp)
        else:
            assert self.stage is not None
            src = self.stage / f"model-{uuid.uuid4().hex[:8]}"
            lead = _rank_machines(trainer)[0]  # rank 0 writes the model file
            try:
                _wait(trainer.save_model.remote(src))
                submit, get = on_machine(lead)
                pull_tree(submit, get, src, tmp, chunk_bytes=self.chunk_bytes, window=self.window)
            finally:
                _remove_on([lead], src)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
        return model_out


def _wait(ref: Any) -> Any:
    """A Ray call's result (a plain value as it is: a stand-in trainer in tests)."""
    import ray

    return ray.get(ref) if isinstance(ref, ray.ObjectRef) else ref


def _rank_machines(trainer: Any) -> list[str]:
    """The trainer's ranks' machines, rank 0's first, each once."""
    return list(dict.fromkeys(_wait(trainer.rank_nodes.remote())))


def _remove_on(machines: list[str], path: NodePath) -> None:
    """Remove ``path`` on each machine that still lives (a lost one took it along)."""
    alive = set(nodes.alive_nodes())
    for node in machines:
        if node in alive:
            with contextlib.suppress(Exception):
                nodes.on_node(node, remove_tree, path)
