"""The low-level half of :mod:`laminar.rundir`: signals held or turned into exceptions while
outputs are staged, directories made and unmade, and single-file outputs written atomically."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from laminar.errors import LaminarError


class OutputError(LaminarError):
    """``--out`` cannot be written as asked; the message names the path and what to do."""


def remove_path(path: Path) -> None:
    """Remove a file, link or directory tree (nothing if it is gone already)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def make_parents(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents; return those created, deepest first."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            pass
        except OSError as e:
            remove_created([m for m in missing if m.exists()])
            raise OutputError(f"{d}: cannot create: {e.strerror or e}") from None
    return missing


def remove_created(dirs: list[Path]) -> None:
    """Undo :func:`make_parents`."""
    for d in dirs:  # deepest first; only if still empty (someone else may have used it)
        with contextlib.suppress(OSError):
            d.rmdir()


def umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``SystemExit(143)`` (so cleanups run) instead of
    ending the process on the spot; another handler already installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        yield
        return

    def _raise(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


SIGNALS = {signal.SIGINT, signal.SIGTERM}


def block_signals() -> set | None:
    """Hold SIGINT and SIGTERM (delivered at :func:`_restore_signals`); the previous mask."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def restore_signals(mask: set | None) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


# Single files --------------------------------------------------------------------------------


def prepare_file_out(path: str | Path) -> Path:
    """Check that the file ``path`` can be written (an existing file is replaced, a directory
    refused), before any work; :class:`OutputError` otherwise."""
    out = Path(path)
    if out.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name")
    where = Path(os.path.abspath(out)).parent
    while not where.exists():
        where = where.parent
    if not where.is_dir():
        raise OutputError(f"{path}: cannot create it: {where} is a file, not a directory")
    if not os.access(where, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise OutputError(f"{path}: cannot write there (permission denied)")
    return out


@contextmanager
def staged_file(out: str | Path) -> Iterator[Path]:
    """Yield a temporary path that atomically replaces ``out`` only if the block succeeds."""
    out = Path(out)
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file name")
    created = make_parents(out.parent)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    except OSError as e:
        remove_created(created)
        raise OutputError(f"{out}: cannot write: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o666 & ~umask())  # mkstemp makes 0600; outputs get the usual permissions
    try:
        with sigterm_raises():
            yield tmp
            os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        remove_created(created)
        raise
