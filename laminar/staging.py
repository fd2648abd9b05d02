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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from laminar import guard
from laminar.errors import OutputError
from laminar.inputfile import InputFileError, load_json

MARKER = ".laminar-run.json"
"""The file every run directory gets at commit: ``{"laminar": version, "command": ...,
"created_utc": ..., "entries": [top-level names Laminar wrote]}``."""
MAX_MARKER_BYTES = 1 << 20  # a marker lists top-level names: a few kB


def read_marker(run_dir: str | Path) -> dict | None:
    """The marker of the run directory ``run_dir`` (read with bounds), or None when it has
    none or it cannot be read as one (then the directory is not known to be Laminar's)."""
    path = Path(run_dir) / MARKER
    if not path.is_file():
        return None
    try:
        data = load_json(path, kind="run directory marker", max_bytes=MAX_MARKER_BYTES)
    except InputFileError:
        return None
    return data if isinstance(data, dict) else None


def marker_command(run_dir: str | Path) -> str | None:
    """The command the marker of ``run_dir`` names (``""`` when it names none), or None
    when ``run_dir`` has no readable marker."""
    data = read_marker(run_dir)
    if data is None:
        return None
    command = data.get("command")
    return command if isinstance(command, str) else ""


def marker_entries(run_dir: str | Path) -> tuple[str, ...]:
    """The top-level entries the marker of ``run_dir`` lists (none without a readable one)."""
    data = read_marker(run_dir) or {}
    entries = data.get("entries")
    if not isinstance(entries, list):
        return ()
    return tuple(e for e in entries if isinstance(e, str) and e and "/" not in e
                 and e not in (".", ".."))  # fmt: skip


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


def prepare_file_out(
    path: str | Path,
    *,
    inputs: Iterable[str | Path] = (),
    outside_run_dirs: bool = False,
    suffixes: tuple[str, ...] = (),
) -> Path:
    """Check that the file ``path`` can be written (an existing file is replaced, a directory
    refused), before any work; :class:`OutputError` otherwise. It may not be, nor lie inside,
    one of the command's ``inputs`` (``laminar.guard``), nor with ``outside_run_dirs`` lie
    inside any Laminar run directory (a run directory holds what its command wrote: a file
    written into one would replace one of its files, or make it foreign); with ``suffixes``,
    its name must end in one of them (``calibrate -o config.yaml`` would write JSON over a
    YAML file)."""
    if "\x00" in str(path):
        raise OutputError(f"{str(path)!r}: a path cannot hold a NUL character")
    out = Path(path)
    guard.check_name_lengths(path, flag="-o")
    if out.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name")
    guard.check_not_special(path, flag="-o")
    if suffixes and out.suffix.lower() not in suffixes:
        raise OutputError(
            f"{path}: expected a {' or '.join(suffixes)} file name (this output is written in "
            "that format)"
        )
    guard.check_apart(path, inputs, flag="-o")
    run = guard.inside_run_dir(path, MARKER) if outside_run_dirs else None
    if run is not None:
        raise OutputError(
            f"{path}: lies inside the Laminar run directory {run}; a run directory holds what "
            "its command wrote, nothing else; write the file elsewhere"
        )
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
    guard.check_not_special(out, flag="output")
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
