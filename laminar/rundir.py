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
  Laminar's (listed in the marker, or itself a Laminar output such as ``plots/``) and the
  command that wrote it is of the same kind (``laminar.guard``: another kind's only with
  ``force``, a ``laminar train`` run's by ``laminar train`` only);
- an output that is, holds or lies inside one of the command's ``inputs`` is refused, even
  with ``force`` (``laminar.guard``; a new path inside an input directory is fine);
- anything else (a directory holding other files, a file, a symlink, the current directory or
  one of its parents) is refused with :class:`OutputError` (exit 2) unless ``force``: then a
  directory is written into (files of the same name replaced, a previous run's other entries
  removed, the user's other files kept) and a file is replaced by the directory.

Writability is checked by :func:`prepare_out` (it creates and removes a probe directory where
the staging directory will go), so an unwritable ``--out`` fails before any work. Run
directories get the user's usual permissions (umask). SIGINT and SIGTERM while staging remove
the staging directory; during the commit they wait for it to finish.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from laminar import guard
from laminar.staging import (  # noqa: F401  (MARKER, staged_file, prepare_file_out: re-exported)
    MARKER,
    OutputError,
    make_parents,
    marker_command,
    marker_entries,
    prepare_file_out,
    remove_created,
    remove_path,
    signal_guard,
    staged_file,
)

_STAGING = ".laminar-staging-"
_PROBE = ".laminar-probe-"


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


def prepare_out(
    path: str | Path,
    *,
    force: bool = False,
    command: str = "laminar",
    inputs: Iterable[str | Path] = (),
) -> OutputTarget:
    """Decide what writing the run directory ``path`` means (module docstring) and check that
    it can be written and touches none of the command's ``inputs`` (``laminar.guard``);
    :class:`OutputError` otherwise. Writes nothing that stays."""
    if "\x00" in str(path):
        raise OutputError(f"{str(path)!r}: a path cannot hold a NUL character")
    guard.check_not_special(path)
    guard.check_name_lengths(path)
    try:
        target = _decide(path, force, command)
    except OSError as e:  # a name too long, a loop of links: the path, not a traceback
        raise OutputError(f"{path}: cannot use it: {e.strerror or e}") from None
    _not_inside_a_train_run(target, path, command)
    # Inside an input directory only a new output, or this command's own previous one (plot's
    # RUN/plots), never something the input holds.
    inside_ok = target.mode == "new" or (
        target.mode == "replace" and target.path.is_dir() and _own_kind(target.path, command)
    )
    guard.check_apart(path, inputs, inside_ok=inside_ok)
    return _checked(target, path)


def _not_inside_a_train_run(target: OutputTarget, given: str | Path, command: str) -> None:
    """Refuse to write over, or into, something that exists inside a ``laminar train`` run
    directory (its config, checkpoints, profile), even with ``--force``: only a new path there,
    or this command's own previous output (``plot``'s ``RUN/plots``), may be written."""
    if target.mode == "new":
        return
    run = guard.inside_run_dir(target.path, MARKER)
    if run is None or guard.kind(marker_command(run) or "") != guard.PROTECTED:
        return
    if _is_run_dir(target.path) and _own_kind(target.path, command):
        return
    raise OutputError(
        f"{given}: lies inside the `laminar train` run directory {run}; writing there would "
        "replace or add to what that run holds, which no other output does, not even with "
        "--force; choose another --out"
    )


def _own_kind(path: Path, command: str) -> bool:
    wrote = marker_command(path)
    if wrote is None:
        return False
    return wrote in guard.GENERIC or guard.kind(wrote) == guard.kind(command)


def _decide(path: str | Path, force: bool, command: str) -> OutputTarget:
    out = Path(os.path.abspath(path))
    if out.is_dir():  # a run directory of another command, even through a symbolic link
        wrote = marker_command(out)
        if wrote is not None:
            guard.check_kind(out, path, command, wrote, force)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        kind = "a symbolic link" if out.is_symlink() else "a file"
        if not force:
            raise OutputError(
                f"{path}: is {kind}, not a run directory; choose another --out "
                "(or --force to replace it)"
            )
        if out.is_symlink() and out.is_dir():
            return OutputTarget(out.resolve(), "merge", command)
        return OutputTarget(out, "replace", command)
    if not out.exists():
        return OutputTarget(out, "new", command)
    return _existing_dir(out, path, force, command)


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
    foreign = [e for e in entries if e not in ours and e != MARKER and not _nested_run(out / e)]
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


def _nested_run(path: Path) -> bool:
    """A Laminar output nested in a run directory (``plots/``), which goes with it; a nested
    ``laminar train`` run does not (``laminar.guard``: only that run's own command replaces it)."""
    return _is_run_dir(path) and guard.kind(marker_command(path) or "") != guard.PROTECTED


def _laminar_entries(path: Path) -> tuple[str, ...]:
    """The entries the marker in ``path`` lists (none when there is no readable marker)."""
    return marker_entries(path)


def _checked(target: OutputTarget, given: str | Path) -> OutputTarget:
    """``target`` after proving that its staging directory can be made (a probe, removed)."""
    where = _staging_parent(target)
    while not where.exists():
        where = where.parent
    if not where.is_dir():
        raise OutputError(f"{given}: cannot create it: {where} is a file, not a directory")
    probe = where / _unique_name(_PROBE)
    try:
        probe.mkdir()
    except OSError as e:
        raise OutputError(f"{given}: cannot write there: {where}: {e.strerror or e}") from None
    finally:  # also when a signal lands right after the mkdir
        with contextlib.suppress(OSError):
            probe.rmdir()
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
    # The staging directory's name is known before it exists, so that a signal landing at any
    # point (even right after the mkdir) finds it and removes it.
    stage = _staging_parent(target) / _unique_name(_STAGING)
    created: list[Path] = []
    with signal_guard() as guard:
        try:
            make_parents(_staging_parent(target), created)
            try:
                stage.mkdir()  # mode 0777 less the umask: the user's usual permissions
            except OSError as e:
                raise OutputError(f"{target.path}: cannot write there: {e.strerror or e}") from None
            yield stage
            _write_marker(stage, target.command)
            with guard.hold():  # the commit's renames run whole
                _commit(stage, target)
        except BaseException as e:
            shutil.rmtree(stage, ignore_errors=True)
            remove_created(created)
            if isinstance(e, OSError) and e.errno in _NO_ROOM:
                raise OutputError(
                    f"{target.path}: cannot write the outputs: {e.strerror}; nothing written"
                ) from None
            raise


def _unique_name(prefix: str) -> str:
    return f"{prefix}{os.getpid()}-{secrets.token_hex(6)}"


# Write failures that are the place's, not the program's: reported as OutputError (exit 2).
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


@contextmanager
def run_output(
    path: str | Path,
    *,
    force: bool = False,
    command: str = "laminar",
    inputs: Iterable[str | Path] = (),
) -> Iterator[Path]:
    """:func:`prepare_out` then :func:`staged_output`: a staging directory for ``path``."""
    target = prepare_out(path, force=force, command=command, inputs=inputs)
    with staged_output(target) as stage:
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
                remove_path(out / name)
        _move_into(stage, out, replace_dirs=set(target.old_entries))
        stage.rmdir()


def _move_into(src: Path, dst: Path, replace_dirs: set[str] = frozenset()) -> None:
    """Move every entry of ``src`` into ``dst``: a directory merges into a directory of the same
    name (a user's), unless that one is Laminar's (``replace_dirs`` or a run directory)."""
    for entry in sorted(src.iterdir()):
        target = dst / entry.name
        if entry.is_dir() and target.is_dir() and not target.is_symlink():
            if entry.name in replace_dirs or _nested_run(target):
                remove_path(target)
                entry.rename(target)
            else:
                _move_into(entry, target)
                entry.rmdir()
        else:
            if target.is_dir() and not target.is_symlink():
                remove_path(target)
            os.replace(entry, target)


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


