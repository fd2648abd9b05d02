"""The weight path between the trainer and the rollouts: one small contract, one simple store.

Contract (the relay tier of paper §4 implements the same two protocols):

- a weight *version* on a machine is a directory holding ``config.json`` and
  ``model.safetensors``, exactly what vLLM's ``worker.reload_weights(weights_path=...)`` loads;
- the trainer calls :meth:`WeightPublisher.publish` with ``safetensors.torch.save(state_dict)``
  bytes; it returns once the trainer's copy is done, so its duration is the actor stall;
- a sharded trainer streams instead (:class:`StreamPublisher`): ``begin`` lends a file of the
  version's size on this machine, every rank writes its rows into it at their offsets
  (``laminar.runtime.train.export``), ``commit`` publishes it — no process holds the whole blob;
- a rollout calls :meth:`WeightSource.latest` for the newest *complete* version and its
  directory. A version is written into a hidden temporary directory and renamed into place, so a
  reader never sees half a version. Checksums are checked once, where bytes crossed a link (the
  relay's commit); a reader only compares the file's size with its manifest (one ``stat``), so
  a version change costs a rollout microseconds, not a hash of the whole model.

:class:`ShmWeightStore` is the default until the relay tier lands: one directory per run under
``/dev/shm`` that the trainer writes and every rollout on the same machine reads. It is both a
publisher and a source; it is a plain object, so it pickles into Ray actors on the same node.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Protocol, runtime_checkable

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
MANIFEST_NAME = "laminar-version.json"
_VERSION_DIR = re.compile(r"^v(\d{10})$")


@runtime_checkable
class WeightPublisher(Protocol):
    """The trainer's side: hand a new version over; return when the trainer may resume."""

    def publish(self, version: int, blob: bytes) -> None:
        """Store ``blob`` (``safetensors.torch.save`` bytes) as ``version``."""


@runtime_checkable
class StreamPublisher(Protocol):
    """A publisher the ranks of a sharded trainer write into directly (no whole-model blob)."""

    def begin(self, version: int, nbytes: int) -> str:
        """A file of ``nbytes`` on this machine for ``version``; ranks map it and fill it."""

    def commit(self, version: int, path: str) -> None:
        """Publish the filled file as ``version``; return when the trainer may go on."""


@runtime_checkable
class WeightSource(Protocol):
    """The rollout's side: where the newest complete version is on this machine."""

    def latest(self) -> tuple[int, str] | None:
        """(version, directory) of the newest complete version, or None before the first."""


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def write_version_dir(
    parent: Path, version: int, blob: bytes, config_json: str, *, checksum: str | None = None
) -> Path:
    """Write one complete version directory under ``parent`` atomically; return its path.

    Files go into a hidden temporary sibling first, then one ``rename`` publishes them, so a
    concurrent :func:`list_versions` sees the whole version or nothing.
    """
    if version < 0:
        raise ValueError(f"weight versions are >= 0, got {version}")
    final = parent / f"v{version:010d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".v{version}-", dir=parent))
    try:
        (tmp / WEIGHTS_NAME).write_bytes(blob)
        (tmp / CONFIG_NAME).write_text(config_json)
        manifest = {"version": version, "nbytes": len(blob), "sha256": checksum or sha256_hex(blob)}
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest))
        os.rename(tmp, final)  # atomic on one filesystem; fails if the version exists
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def list_versions(parent: Path) -> list[tuple[int, Path]]:
    """Complete versions under ``parent``, oldest first (temporary directories are skipped)."""
    out = []
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return []
    for name in names:
        m = _VERSION_DIR.match(name)
        if m:
            out.append((int(m.group(1)), parent / name))
    return sorted(out)


def complete_version_dir(path: str | Path) -> bool:
    """True when the directory's weights have the size its manifest says (a ``stat``, no read):
    what a reader checks — a committed version was verified once, where it was committed."""
    p = Path(path)
    try:
        manifest = json.loads((p / MANIFEST_NAME).read_text())
        return (p / WEIGHTS_NAME).stat().st_size == manifest.get("nbytes")
    except (OSError, ValueError):
        return False


def verify_version_dir(path: str | Path) -> bool:
    """True when the directory's weights match the checksum in its manifest."""
    p = Path(path)
    try:
        manifest = json.loads((p / MANIFEST_NAME).read_text())
        data = (p / WEIGHTS_NAME).read_bytes()
    except (OSError, ValueError):
        return False
    return len(data) == manifest.get("nbytes") and sha256_hex(data) == manifest.get("sha256")


class ShmWeightStore:
    """A run's weight versions in one shared-memory directory (single machine).

    ``keep`` versions are kept: a rollout that read ``latest()`` just before a newer version
    arrived can still load the one it was told about. ``verify``: readers also hash each
    version once (tests and tools; the runtime's rollouts never do, see the module doc).
    """

    def __init__(self, root: str | Path, config_json: str, *, keep: int = 3, verify: bool = False):
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self.root = Path(root)
        self.config_json = config_json
        self.keep = keep
        self.verify = verify
        self.root.mkdir(parents=True, exist_ok=True)
        self._checked: dict[str, bool] = {}  # path -> checksum ok (a version never changes)

    def publish(self, version: int, blob: bytes) -> None:
        """Write ``version`` (atomically) and drop versions older than the newest ``keep``."""
        write_version_dir(self.root, version, blob, self.config_json)
        self._gc()

    def begin(self, version: int, nbytes: int) -> str:
        """A hidden staging directory with a ``nbytes`` weights file for the ranks to fill."""
        if version < 0 or nbytes <= 0:
            raise ValueError(f"bad version {version} or size {nbytes}")
        tmp = Path(tempfile.mkdtemp(prefix=f".v{version}-", dir=self.root))
        with open(tmp / WEIGHTS_NAME, "wb") as f:
            f.truncate(nbytes)
        return str(tmp / WEIGHTS_NAME)

    def commit(self, version: int, path: str) -> None:
        """Rename the filled staging directory into place as ``version`` (size in the manifest;
        the bytes never left this machine's memory, so there is nothing to verify)."""
        tmp = Path(path).parent
        try:
            nbytes = Path(path).stat().st_size
            (tmp / CONFIG_NAME).write_text(self.config_json)
            (tmp / MANIFEST_NAME).write_text(json.dumps({"version": version, "nbytes": nbytes}))
            os.rename(tmp, self.root / f"v{version:010d}")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._gc()

    def _gc(self) -> None:
        for _, old in list_versions(self.root)[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> tuple[int, str] | None:
        """The newest complete version (its size checked; hashed too when ``verify``)."""
        for version, path in reversed(list_versions(self.root)):
            key = str(path)
            if key not in self._checked:
                ok = complete_version_dir(path)
                self._checked[key] = ok and (not self.verify or verify_version_dir(path))
            if self._checked[key]:
                return version, key
        return None

    def close(self) -> None:
        """Remove every version and the store directory."""
        shutil.rmtree(self.root, ignore_errors=True)


def default_store_root(run_name: str) -> Path:
    """``/dev/shm/laminar-<run_name>/weights`` where /dev/shm exists, else the temp dir."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    return base / f"laminar-{run_name}" / "weights"
