"""The low-level half of :mod:`laminar.rundir`: signals held or turned into exceptions while
outputs are staged, directories made and unmade, and single-file outputs written atomically."""

from __future__ import annotations

import contextlib
import os
import secrets
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


def make_parents(path: Path, created: list[Path]) -> None:
    """Create ``path`` and its missing parents, each put first in ``created`` (deepest first)
    just before it is made, so that whatever interrupts this can undo it."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        created.insert(0, d)
        try:
            d.mkdir()
        except FileExistsError:
            pass
        except OSError as e:
            raise OutputError(f"{d}: cannot create: {e.strerror or e}") from None


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


class SignalGuard:
    """SIGINT and SIGTERM as exceptions while outputs are staged, held during a commit.

    Made by :func:`signal_guard`. SIGTERM raises ``SystemExit(143)`` and SIGINT
    ``KeyboardInterrupt`` in the main thread, so that cleanups run instead of the process
    ending on the spot; inside :meth:`hold` a signal waits until the held block is over.
    (Blocking the signal mask is not enough: another thread may take the signal, and Python
    then runs the handler in the main thread anyway.)"""

    def __init__(self) -> None:
        self.holding = False
        self.pending: int | None = None

    def handle(self, signum: int, frame) -> None:
        if self.holding:
            self.pending = self.pending or signum
            return
        _raise_for(signum)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Signals wait while the block runs, then act."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            if self.pending is not None:
                signum, self.pending = self.pending, None
                _raise_for(signum)


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


@contextmanager
def signal_guard() -> Iterator[SignalGuard]:
    """A :class:`SignalGuard` whose handlers are installed while the block runs (main thread
    only; a handler someone else installed is left alone)."""
    guard = SignalGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    previous = {s: signal.getsignal(s) for s in defaults}
    ours = [s for s in defaults if previous[s] in (defaults[s], None)]
    for s in ours:
        signal.signal(s, guard.handle)
    try:
        yield guard
    finally:
        for s in ours:
            signal.signal(s, previous[s])


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
    # A probe file, not os.access: root passes access checks on read-only file systems.
    probe = where / f".laminar-probe-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        probe.touch(exist_ok=False)
    except OSError as e:
        raise OutputError(f"{path}: cannot write there: {where}: {e.strerror or e}") from None
    finally:  # also when a signal lands right after the file is made
        with contextlib.suppress(OSError):
            probe.unlink()
    return out


@contextmanager
def staged_file(out: str | Path) -> Iterator[Path]:
    """Yield a temporary path that atomically replaces ``out`` only if the block succeeds."""
    out = Path(out)
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file name")
    created: list[Path] = []
    try:
        make_parents(out.parent, created)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    except OSError as e:
        remove_created(created)
        raise OutputError(f"{out}: cannot write: {e.strerror or e}") from None
    except BaseException:
        remove_created(created)
        raise
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o666 & ~umask())  # mkstemp makes 0600; outputs get the usual permissions
    try:
        with signal_guard():
            yield tmp
            os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        remove_created(created)
        raise
