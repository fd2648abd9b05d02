"""Run directories: where ``--out`` may write, and outputs that appear whole or not at all.

The one mechanism behind every ``--out`` (simulate, replay, plot, train, and the commands to
come). Public API::

    target = prepare_out(path, force=False, command="simulate")  # decide + check, no writes
    with staged_output(target) as stage:   # a fresh, empty staging directory
        ...write files into stage...       # the expensive work may run inside too
    # on success: stage becomes ``path`` atomically; on any exception, SIGINT or SIGTERM:
    # stage is removed, ``path`` is as it was, and directories created for it are gone.

    with run_output(path, force=..., command=...) as stage:   # the two above in one call
        ...

Rules (:func:`prepare_out`), so that ``--out`` never destroys a user's files:

- a path that does not exist is created (parents too);
- an empty directory is filled;
- a previous Laminar run directory (it holds the marker :data:`MARKER`, written at every
  commit, listing the entries Laminar wrote) is replaced whole, provided every entry in it is
  Laminar's (listed in the marker, or itself a Laminar output such as ``plots/``);
- anything else (a directory holding other files, a file, a symlink, the current directory or
  one of its parents) is refused with :class:`OutputError` (exit 2) unless ``force``: then a
  directory is written into (files of the same name replaced, a previous run's other entries
  removed, the user's other files kept) and a file is replaced by the directory.

Writability is checked by :func:`prepare_out` (it creates and removes a probe directory where
the staging directory will go), so an unwritable ``--out`` fails before any work. Run
directories get the user's usual permissions (umask), not ``mkdtemp``'s 0700.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from laminar.errors import LaminarError

MARKER = ".laminar-run.json"
"""The file every run directory gets at commit: ``{"laminar": version, "command": ...,
"created_utc": ..., "entries": [top-level names Laminar wrote]}``."""

_STAGING = ".laminar-staging-"
_PROBE = ".laminar-probe-"


class OutputError(LaminarError):
    """``--out`` cannot be written as asked; the message names the path and what to do."""


@dataclass(frozen=True)
class OutputTarget:
    """Where a command's output goes and how (made by :func:`prepare_out`).

    ``mode``: ``new`` (create the directory), ``replace`` (swap out a previous run directory,
    or with ``force`` a file) or ``merge`` (move the outputs into an existing directory)."""

    path: Path
    mode: str
    command: str
    old_entries: tuple[str, ...] = ()
    """Entries a previous run wrote into ``path`` (removed by a ``merge`` commit)."""


def prepare_out(path: str | Path, *, force: bool = False, command: str = "laminar") -> OutputTarget:
    """Decide what writing the run directory ``path`` means (module docstring) and check that
    it can be written; :class:`OutputError` otherwise. Writes nothing that stays."""
    out = Path(os.path.abspath(path))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        kind = "a symbolic link" if out.is_symlink() else "a file"
        if not force:
            raise OutputError(
                f"{path}: is {kind}, not a run directory; choose another --out "
                "(or --force to replace it)"
            )
        if out.is_symlink() and out.is_dir():
            return _checked(OutputTarget(out.resolve(), "merge", command), path)
        return _checked(OutputTarget(out, "replace", command), path)
    if not out.exists():
        return _checked(OutputTarget(out, "new", command), path)
    return _checked(_existing_dir(out, path, force, command), path)


def _existing_dir(out: Path, given: str | Path, force: bool, command: str) -> OutputTarget:
    cwd = Path.cwd().resolve()
    if cwd == out.resolve() or out.resolve() in cwd.parents:
        if not force:
            what = "the current directory" if cwd == out.resolve() else "a parent of ."
            raise OutputError(
                f"{given}: is {what}; give --out a directory of its own, e.g. runs/NAME "
                "(or --force to write into it)"
            )
        return OutputTarget(out, "merge", command, _laminar_entries(out))
    try:
        entries = sorted(p.name for p in out.iterdir())
    except OSError as e:
        raise OutputError(f"{given}: cannot list: {e.strerror or e}") from None
    if not entries:
        return OutputTarget(out, "merge", command)
    ours = _laminar_entries(out)
    foreign = [e for e in entries if e not in ours and e != MARKER and not _is_run_dir(out / e)]
    if MARKER in entries and not foreign:
        return OutputTarget(out, "replace", command)
    if not force:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        shown = ", ".join(repr(f)[1:-1][:80] for f in foreign[:3]) + more
        why = (
            f"a Laminar run directory holding files Laminar did not write ({shown})"
            if MARKER in entries
            else f"a directory that is not a Laminar run directory (it holds {shown})"
        )
        raise OutputError(
            f"{given}: is {why}; choose a new --out (or --force to write into it, keeping "
            "those files)"
        )
    return OutputTarget(out, "merge", command, ours)


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def _laminar_entries(path: Path) -> tuple[str, ...]:
    """The entries the marker in ``path`` lists (none when there is no readable marker)."""
    try:
        data = json.loads((path / MARKER).read_text())
        return tuple(str(e) for e in data.get("entries", []) if "/" not in str(e))
    except (OSError, ValueError, AttributeError, TypeError):
        return ()


def _checked(target: OutputTarget, given: str | Path) -> OutputTarget:
    """``target`` after proving that its staging directory can be made (a probe, removed)."""
    where = _staging_parent(target)
    while not where.exists():
        where = where.parent
    if not where.is_dir():
        raise OutputError(f"{given}: cannot create it: {where} is a file, not a directory")
    mask = _block_signals()  # a signal must not strand the probe
    try:
        os.rmdir(tempfile.mkdtemp(prefix=_PROBE, dir=where))
    except OSError as e:
        raise OutputError(f"{given}: cannot write there: {where}: {e.strerror or e}") from None
    finally:
        _restore_signals(mask)
    return target


def _staging_parent(target: OutputTarget) -> Path:
    # A merge stages inside the directory (its parent may not be ours to write); new and
    # replace stage beside it, so that the commit is one rename on the same file system.
    return target.path if target.mode == "merge" else target.path.parent


# Staging and commit --------------------------------------------------------------------------


@contextmanager
def staged_output(target: OutputTarget) -> Iterator[Path]:
    """An empty staging directory that becomes ``target.path`` only if the block succeeds.

    On an exception (SIGINT is KeyboardInterrupt; SIGTERM is turned into ``SystemExit(143)``
    while the block runs in the main thread) the staging directory and the parents created
    for it are removed and the exception propagates."""
    with _sigterm_raises():
        # Signals wait while the staging directory is made, so that none lands between its
        # creation and the handler that removes it.
        mask = _block_signals()
        stage, created = None, []
        try:
            created = _make_parents(_staging_parent(target))
            stage = _make_stage(target)
            _restore_signals(mask)
            yield stage
            _write_marker(stage, target.command)
            _block_signals()  # the commit's renames run whole
            _commit(stage, target)
        except BaseException as e:
            if stage is not None:
                shutil.rmtree(stage, ignore_errors=True)
            _remove_created(created)
            if isinstance(e, OSError) and e.errno in _NO_ROOM:
                raise OutputError(
                    f"{target.path}: cannot write the outputs: {e.strerror}; nothing written"
                ) from None
            raise
        finally:
            _restore_signals(mask)


def _make_stage(target: OutputTarget) -> Path:
    try:
        stage = Path(tempfile.mkdtemp(prefix=_STAGING, dir=_staging_parent(target)))
    except OSError as e:
        raise OutputError(f"{target.path}: cannot write there: {e.strerror or e}") from None
    stage.chmod(0o777 & ~_umask())
    return stage


# Write failures that are the place's, not the program's: reported as OutputError (exit 2).
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


@contextmanager
def run_output(
    path: str | Path, *, force: bool = False, command: str = "laminar"
) -> Iterator[Path]:
    """:func:`prepare_out` then :func:`staged_output`: a staging directory for ``path``."""
    with staged_output(prepare_out(path, force=force, command=command)) as stage:
        yield stage


def staged_dir(out: str | Path, *, force: bool = False, command: str = "laminar"):
    """A run directory ``out`` written whole or not at all (same as :func:`run_output`)."""
    return run_output(out, force=force, command=command)


def _commit(stage: Path, target: OutputTarget) -> None:
    out = target.path
    if target.mode == "new":
        if out.exists():
            raise OutputError(f"{out}: appeared while the outputs were written; nothing written")
        stage.rename(out)
    elif target.mode == "replace":
        old = out.parent / f".{out.name}.old-{os.getpid()}-{time.monotonic_ns()}"
        out.rename(old)
        try:
            stage.rename(out)
        except OSError:
            old.rename(out)  # put the previous output back before reporting
            raise
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    else:
        new = {p.name for p in stage.iterdir()}
        for name in target.old_entries:  # a previous run's entries this run does not write
            if name not in new:
                _remove(out / name)
        _move_into(stage, out, replace_dirs=set(target.old_entries))
        stage.rmdir()


def _move_into(src: Path, dst: Path, replace_dirs: set[str] = frozenset()) -> None:
    """Move every entry of ``src`` into ``dst``: a directory merges into a directory of the same
    name (a user's), unless that one is Laminar's (``replace_dirs`` or a run directory)."""
    for entry in sorted(src.iterdir()):
        target = dst / entry.name
        if entry.is_dir() and target.is_dir() and not target.is_symlink():
            if entry.name in replace_dirs or _is_run_dir(target):
                _remove(target)
                entry.rename(target)
            else:
                _move_into(entry, target)
                entry.rmdir()
        else:
            if target.is_dir() and not target.is_symlink():
                _remove(target)
            os.replace(entry, target)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _write_marker(stage: Path, command: str) -> None:
    from laminar import __version__

    entries = sorted(p.name for p in stage.iterdir())
    marker = {
        "laminar": __version__,
        "command": command,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "entries": entries,
    }
    (stage / MARKER).write_text(json.dumps(marker, indent=1) + "\n")


def _make_parents(path: Path) -> list[Path]:
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
            _remove_created([m for m in missing if m.exists()])
            raise OutputError(f"{d}: cannot create: {e.strerror or e}") from None
    return missing


def _remove_created(dirs: list[Path]) -> None:
    for d in dirs:  # deepest first; only if still empty (someone else may have used it)
        with contextlib.suppress(OSError):
            d.rmdir()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _sigterm_raises() -> Iterator[None]:
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


_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _block_signals() -> set | None:
    """Hold SIGINT and SIGTERM (delivered at :func:`_restore_signals`); the previous mask."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def _restore_signals(mask: set | None) -> None:
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
    created = _make_parents(out.parent)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
    except OSError as e:
        _remove_created(created)
        raise OutputError(f"{out}: cannot write: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
    try:
        with _sigterm_raises():
            yield tmp
            os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        _remove_created(created)
        raise
