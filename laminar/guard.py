"""What an output may never touch: the command's own inputs, and other commands' run directories.

Used by :func:`laminar.rundir.prepare_out` (``--out DIR``) and
:func:`laminar.staging.prepare_file_out` (``-o FILE``) before any work, so a refused output
costs nothing and changes nothing. Paths are compared resolved (symbolic links, ``..``, a
trailing slash, a relative spelling all name the same place), and an existing output is also
compared by identity (``os.path.samefile``: a hard link or a bind mount of an input).

- An output that **is** an input, or **holds** one (a directory above it), is refused: writing
  it would replace or delete what the command reads (``laminar plot RUN --out RUN``).
- An output **inside** an input directory is refused too, except a new path or the command's
  own previous output there (``laminar plot RUN`` writes ``RUN/plots``, and replaces it the
  next time); never a file or directory the input holds (``calibrate RUN -o RUN/config.yaml``).
- A run directory's marker names the command that wrote it. One written by a command of
  another kind is not replaced without ``--force``; one written by ``laminar train`` (its
  checkpoints and model took hours) is replaced by ``laminar train`` only, never with
  ``--force`` by another command.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from laminar.errors import OutputError

# Commands whose run directories are of one kind (a replay's directory is a simulation's).
KINDS = {"simulate": "simulate", "replay": "simulate"}
KIND_NAMES = {"simulate": "`laminar simulate` / `laminar replay`"}
PROTECTED = "train"
"""The kind no other command writes over, even with ``--force``."""
GENERIC = {"", "laminar"}
"""Markers of library calls and older versions: no kind to compare."""


def kind(command: str) -> str:
    """The kind of run directory ``command`` writes (``simulate`` for replay too)."""
    return KINDS.get(command, command)


def kind_name(k: str) -> str:
    return KIND_NAMES.get(k, f"`laminar {k}`")


def resolved(path: str | Path) -> Path:
    """``path`` made absolute with every symbolic link and ``..`` resolved (also when it, or a
    tail of it, does not exist yet)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def check_kind(out: Path, given: str | Path, command: str, wrote: str, force: bool) -> None:
    """Refuse to replace the run directory ``out``, written by ``wrote``, with ``command``'s
    output when they are of different kinds (module docstring)."""
    if wrote in GENERIC or command in GENERIC or kind(wrote) == kind(command):
        return
    theirs = kind_name(kind(wrote))
    if kind(wrote) == PROTECTED:
        raise OutputError(
            f"{given}: is a {theirs} run directory (its checkpoints and model); "
            f"`laminar {command}` never writes over it, not even with --force; choose "
            "another --out (or remove that directory yourself)"
        )
    if not force:
        raise OutputError(
            f"{given}: is a {theirs} run directory, not one of `laminar {command}`; choose "
            "another --out (or --force to replace it)"
        )


def check_apart(
    out: str | Path,
    inputs: Iterable[str | Path],
    *,
    flag: str = "--out",
    inside_ok: bool = False,
) -> None:
    """Refuse the output ``out`` when it is, holds or lies inside one of ``inputs`` (module
    docstring); ``inside_ok``: a new path, or the command's own previous output, inside an
    input directory is allowed."""
    if "\x00" in str(out):
        raise OutputError(f"{str(out)!r}: a path cannot hold a NUL character")
    target = resolved(out)
    for given in inputs:
        if given is None or str(given) == "" or "\x00" in str(given):
            continue  # no such file can exist (a NUL is refused where the input is read)
        src = resolved(given)
        if target == src or _same(out, given):
            why = "is"
        elif src.is_relative_to(target):
            why = "holds"
        elif target.is_relative_to(src) and src.is_dir() and not inside_ok:
            why = "lies inside"
        else:
            continue
        raise OutputError(
            f"{out}: {why} {given}, an input of this command; writing {flag} there would "
            f"replace what it reads; choose another {flag}"
        )


def check_not_special(out: str | Path, *, flag: str = "--out") -> None:
    """Refuse an output that exists as a device, FIFO or socket (``/dev/null``, a named pipe),
    even with ``--force``: replacing one would delete a node the system or another program
    relies on (``simulate --out /dev/null --force`` replaced /dev/null with a directory)."""
    with contextlib.suppress(OSError, ValueError):
        mode = os.lstat(out).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            what = (
                "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else ("a FIFO" if stat.S_ISFIFO(mode) else "a socket")
            )
            raise OutputError(
                f"{out}: is {what}, not a file or directory; {flag} never replaces one, not "
                f"even with --force; choose another {flag}"
            )


NAME_MAX = 255
"""Longest file name (bytes) of the usual file systems (ext4, XFS, btrfs, tmpfs)."""


def check_name_lengths(out: str | Path, *, flag: str = "--out") -> None:
    """Refuse an output whose path has a name longer than :data:`NAME_MAX` bytes before any
    work (it would fail only when the finished output is moved into place)."""
    for part in Path(os.path.abspath(out)).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise OutputError(
                f"{str(out)[:80]}...: {flag} holds a name of {len(os.fsencode(part)):,} bytes; "
                f"a file system takes at most {NAME_MAX}"
            )


def _same(a: str | Path, b: str | Path) -> bool:
    """Whether two existing paths are one file or directory (hard link, bind mount)."""
    with contextlib.suppress(OSError, ValueError):
        return os.path.samefile(a, b)
    return False


def inside_run_dir(path: str | Path, marker: str) -> Path | None:
    """The nearest directory above ``path`` (resolved) that is a Laminar run directory (it
    holds ``marker``), or None."""
    for parent in resolved(path).parents:
        with contextlib.suppress(OSError):
            if (parent / marker).is_file():
                return parent
    return None
