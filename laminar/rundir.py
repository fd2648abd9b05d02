"""Outputs that appear whole or not at all.

Every command that writes files stages them in a hidden sibling and renames it into place at
the end, so a failed run (bad input, crash, Ctrl-C) never leaves a half-written output behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_dir(out: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory that replaces ``out`` only if the block succeeds."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_file(out: str | Path) -> Iterator[Path]:
    """Yield a temporary path that atomically replaces ``out`` only if the block succeeds."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    tmp = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual permissions
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)


@contextmanager
def staged_files(out: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory whose contents move into the directory ``out`` only if
    the block succeeds; what ``out`` already holds stays, except files of the same name.

    For outputs written into a directory that may hold other things (``laminar plot --out
    DIR``), where :func:`staged_dir` would replace the whole directory."""
    out = Path(out)
    if not out.exists():
        with staged_dir(out) as tmp:
            yield tmp
        return
    if not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a directory")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=out))
    try:
        yield tmp
        _move_into(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _move_into(src: Path, dst: Path) -> None:
    """Move every entry of ``src`` into ``dst``, merging into subdirectories that exist."""
    for entry in sorted(src.iterdir()):
        target = dst / entry.name
        if entry.is_dir() and target.is_dir():
            _move_into(entry, target)
        else:
            os.replace(entry, target)
