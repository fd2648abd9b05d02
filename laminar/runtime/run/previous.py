"""The previous run that a new ``laminar train --out DIR`` replaces, set aside until the new
run has done its first step.

``laminar train`` writes its run directory as it goes (so that ``--resume`` can go on), so it
cannot stage the directory whole like the other commands. Instead the previous run is renamed
aside (hidden, beside it or, in a ``--force`` merge, inside it) and removed only once the new
run has finished a step; a run that fails before that (a bad ``--address``, engines that do not
start, Ctrl-C) gives the directory back as it was.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any


class Previous:
    """What ``--out`` held before the new run, set aside (:meth:`set_aside`)."""

    def __init__(self, out: Path, aside: Path | None, merged: bool):
        self.out = out
        self.aside = aside  # None: nothing was there to replace
        self.merged = merged  # aside holds a previous run's entries of a directory kept
        self.keep: set[str] = set()  # entries of ``out`` that are not the new run's

    @classmethod
    def set_aside(cls, target: Any) -> Previous:
        """Move what ``target`` (``laminar.rundir.prepare_out``'s verdict) replaces aside and
        create the run directory."""
        out = Path(target.path)
        stamp = f"{os.getpid()}-{time.monotonic_ns()}"
        aside, merged = None, False
        if target.mode == "replace":
            aside = out.parent / f".{out.name}.previous-{stamp}"
            out.rename(aside)
        elif getattr(target, "old_entries", ()):
            aside, merged = out / f".laminar-previous-{stamp}", True
            aside.mkdir()
            for name in target.old_entries:
                if os.path.lexists(out / name):
                    (out / name).rename(aside / name)
        out.mkdir(parents=True, exist_ok=True)
        held = cls(out, aside, merged)
        held.keep = {p.name for p in out.iterdir()}
        return held

    def drop(self) -> None:
        """The new run is under way: the previous one goes for good."""
        if self.aside is not None:
            _remove(self.aside)
            self.aside = None

    def give_back(self) -> bool:
        """The new run failed before its first step: remove what it wrote and put the previous
        run back; whether there was one to put back."""
        if self.aside is None:
            return False
        if self.merged:
            for p in self.out.iterdir():
                if p.name not in self.keep:
                    _remove(p)
            for p in self.aside.iterdir():
                p.rename(self.out / p.name)
            self.aside.rmdir()
        else:
            _remove(self.out)
            self.aside.rename(self.out)
        self.aside = None
        return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
