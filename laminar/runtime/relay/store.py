"""A relay's weight versions in shared CPU memory (paper §4.1: relays keep weights in host memory).

The layout under ``root`` is the one of :mod:`laminar.runtime.weights`, so any reader of that
contract (``list_versions``, ``verify_version_dir``, ``ShmWeightStore.latest``) reads a relay:

    v0000000007/          a committed version: config.json, model.safetensors, laminar-version.json
    .staging-v7-…/        a version being received or sent (hidden: readers skip it)
    .spare-…              an allocated, mapped file waiting to hold the next version
    .inbox-…              a spare lent to the trainer on this machine, which copies into it

A version appears with one ``rename`` of a complete staging directory whose checksum matched,
so a reader sees a whole version or none. Fresh tmpfs pages cost more here than the network
(allocating and mapping 256 MiB takes ~0.25 s on this VM), so each relay allocates and maps its
next file *between* broadcasts (:meth:`RelayStore.prepare_spare`) instead of during one.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from laminar.runtime.weights import MANIFEST_NAME, WEIGHTS_NAME, list_versions


@dataclass
class Mapped:
    """A file of ``nbytes`` under /dev/shm, mapped shared and writable into this process."""

    path: Path
    nbytes: int
    mm: mmap.mmap

    def view(self) -> memoryview:
        """The file's bytes (release the view before :meth:`close`)."""
        return memoryview(self.mm)[: self.nbytes]

    def close(self) -> None:
        self.mm.close()


def map_file(path: Path, nbytes: int, *, create: bool, populate: bool) -> Mapped:
    """Map ``path`` (created, sized to ``nbytes``, when ``create``); ``populate`` pre-faults it."""
    if nbytes <= 0:
        raise ValueError(f"a weight file has at least one byte, got {nbytes}")
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    try:
        if create:
            os.ftruncate(fd, nbytes)
        flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
        return Mapped(Path(path), nbytes, mmap.mmap(fd, nbytes, flags=flags))
    finally:
        os.close(fd)


class RelayStore:
    """The versions one relay holds; at most ``keep`` committed versions stay on disk.

    Thread-safe: the relay's event loop and its background allocation share it.
    """

    def __init__(self, root: str | Path, *, keep: int = 3):
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self.root = Path(root)
        self.keep = keep
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._spare: Mapped | None = None

    # --- readers -------------------------------------------------------------------------------
    def latest(self) -> tuple[int, str] | None:
        """(version, directory) of the newest committed version, or None."""
        versions = list_versions(self.root)
        return (versions[-1][0], str(versions[-1][1])) if versions else None

    def has(self, version: int) -> bool:
        """True when ``version`` is committed here."""
        return (self.root / f"v{version:010d}" / MANIFEST_NAME).exists()

    # --- files for the next version -------------------------------------------------------------
    def prepare_spare(self, nbytes: int) -> None:
        """Allocate and map a file of ``nbytes`` now, so the next version of that size needs no
        page faults (run it between broadcasts; it takes ~1 s/GiB here)."""
        with self._lock:
            if self._spare is not None and self._spare.nbytes == nbytes:
                return
        fresh = map_file(self._hidden(".spare-"), nbytes, create=True, populate=True)
        with self._lock:
            old, self._spare = self._spare, fresh
        if old is not None:
            _drop(old)

    def new_file(self, nbytes: int) -> Mapped:
        """A mapped file of ``nbytes`` for a new version: the spare when it fits, else a fresh one
        (whose pages then fault in while bytes arrive)."""
        with self._lock:
            spare = (
                self._spare if self._spare is not None and self._spare.nbytes == nbytes else None
            )
            if spare is not None:
                self._spare = None
        if spare is not None:
            return spare
        return map_file(self._hidden(".new-"), nbytes, create=True, populate=False)

    def lend_inbox(self, nbytes: int) -> Path:
        """A file of ``nbytes`` the trainer on this machine copies a version into (renamed from
        the spare when it fits). The relay later adopts it with :meth:`adopt_file`."""
        mapped = self.new_file(nbytes)
        path = self._hidden(".inbox-")
        os.rename(mapped.path, path)
        mapped.close()  # the pages stay in tmpfs; the trainer maps the file itself
        return path

    def adopt_file(self, path: str | Path, nbytes: int) -> Mapped:
        """Map an inbox file the trainer filled (read side of the actor's one copy)."""
        path = Path(path)
        if path.parent != self.root or not path.name.startswith(".inbox-"):
            raise ValueError(f"{path} is not an inbox of the relay store at {self.root}")
        if path.stat().st_size != nbytes:
            raise ValueError(f"{path} holds {path.stat().st_size} bytes, expected {nbytes}")
        # not pre-faulted: the pages exist, mapping them costs ~0.1 s/GiB of minor faults that
        # are better spread over the sends than paid before the first chunk
        return map_file(path, nbytes, create=False, populate=False)

    # --- commit --------------------------------------------------------------------------------
    def commit(self, version: int, mapped: Mapped, files: dict[str, str], manifest: dict) -> Path:
        """Publish ``mapped`` as ``version`` with the small ``files`` beside it, in one rename.
        The mapping stays usable (same pages). Call :meth:`gc` afterwards, off the critical
        path: freeing a large tmpfs file takes tens of milliseconds."""
        final = self.root / f"v{version:010d}"
        tmp = Path(tempfile.mkdtemp(prefix=f".staging-v{version}-", dir=self.root))
        try:
            os.rename(mapped.path, tmp / WEIGHTS_NAME)
            mapped.path = tmp / WEIGHTS_NAME
            for name, text in files.items():
                (tmp / name).write_text(text)
            (tmp / MANIFEST_NAME).write_text(json.dumps({"version": version, **manifest}))
            os.rename(tmp, final)  # atomic: readers see the whole version or nothing
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        mapped.path = final / WEIGHTS_NAME
        return final

    def gc(self) -> None:
        """Drop committed versions older than the newest ``keep`` (renamed away first, so a
        reader never lists a half-deleted version)."""
        for version, path in list_versions(self.root)[: -self.keep]:
            trash = self._hidden(f".trash-v{version}-")
            try:
                os.rename(path, trash)
            except OSError:
                continue
            shutil.rmtree(trash, ignore_errors=True)

    def discard(self, mapped: Mapped) -> None:
        """Forget a file that will never become a version."""
        _drop(mapped)

    def close(self) -> None:
        """Remove the store and everything in it."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            _drop(spare)
        shutil.rmtree(self.root, ignore_errors=True)

    def _hidden(self, prefix: str) -> Path:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=self.root)
        os.close(fd)
        os.unlink(name)  # map_file creates it exclusively
        return Path(name)


def _drop(mapped: Mapped) -> None:
    with contextlib.suppress(BufferError):  # a view is still exported: unmapped with it
        mapped.close()
    Path(mapped.path).unlink(missing_ok=True)
