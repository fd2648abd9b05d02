"""Reading a user's input file with bounds: one path for every command and every kind of file.

A file a user names (config, cost file, ``config.json``, a run directory's CSV/JSON/pickle) is
read only when it is a regular file: a FIFO would block the reader forever, ``/dev/zero`` would
fill memory, a directory is a mistake. Its size is bounded before it is read, JSON is parsed
with a depth bound and without the non-standard ``NaN``/``Infinity`` constants, and every
failure is an :class:`InputFileError` naming the file (exit 2), never a traceback.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from laminar.errors import LaminarError

MiB = 1 << 20
MAX_JSON_DEPTH = 64  # no input of Laminar nests deeper; a deeper one is an attack or an accident


class InputFileError(LaminarError):
    """An input file is missing, not a regular file, too large or malformed; names the file."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        self.detail = message
        super().__init__(f"{path}: {message}")


def check_regular(path: str | Path, *, kind: str, max_bytes: int) -> int:
    """The size of ``path`` after checking it is a regular file of at most ``max_bytes``."""
    text = str(path)
    if "\x00" in text:
        raise InputFileError(repr(text), "a path cannot hold a NUL character")
    try:
        st = os.stat(text)
    except FileNotFoundError:
        raise InputFileError(text, f"cannot read {kind}: no such file") from None
    except OSError as e:
        raise InputFileError(text, f"cannot read {kind}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputFileError(text, f"is a directory; expected a {kind}")
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(
            text, f"is not a regular file (a FIFO, device or socket); expected a {kind}"
        )
    if st.st_size > max_bytes:
        raise InputFileError(text, f"{kind} of {st.st_size:,} bytes is larger than {max_bytes:,}")
    return st.st_size


def read_bytes(path: str | Path, *, kind: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (module docstring)."""
    check_regular(path, kind=kind, max_bytes=max_bytes)
    try:
        # O_NONBLOCK: should the file be swapped for a FIFO after the check, open does not block
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise InputFileError(str(path), f"cannot read {kind}: {e.strerror or e}") from None
    if len(raw) > max_bytes:
        raise InputFileError(str(path), f"{kind} is larger than {max_bytes:,} bytes")
    return raw


def read_text(path: str | Path, *, kind: str, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``."""
    raw = read_bytes(path, kind=kind, max_bytes=max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(str(path), f"{kind} is not UTF-8 text (byte {e.start})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value`` nests lists and mappings (iterative, so no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def leaves(value: Any, prefix: str = "") -> Iterator[tuple[Any, str]]:
    """Every value inside ``value``'s mappings and lists, at any depth, with its key path from
    ``prefix`` (``a.b[2]``); iterative, so no recursion limit (last keys first)."""
    stack: list[tuple[Any, str]] = [(value, prefix)]
    while stack:
        v, key = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, f"{key}.{k}" if key else str(k)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{key}[{i}]") for i, x in enumerate(v))
        else:
            yield v, key


def load_json_text(
    text: str, source: str, *, max_depth: int = MAX_JSON_DEPTH, allow_nan: bool = False
) -> Any:
    """Parse JSON ``text`` from ``source``: standard numbers only (``allow_nan``: also Python's
    ``NaN``/``Infinity``, which Laminar's own run files hold where a figure is unknown; their
    readers check each field), at most ``max_depth`` deep."""
    try:
        value = json.loads(text, parse_constant=None if allow_nan else _no_constant)
    except RecursionError:
        raise InputFileError(source, f"JSON nested more than {max_depth} deep") from None
    except ValueError as e:
        if "integer string conversion" in str(e):  # Python's 4,300-digit guard, in words
            raise InputFileError(source, "holds a number of more than 4,300 digits") from None
        raise InputFileError(source, f"not valid JSON: {e}") from None
    if depth(value, max_depth) > max_depth:
        raise InputFileError(source, f"JSON nested more than {max_depth} deep")
    return value


def load_json(
    path: str | Path,
    *,
    kind: str,
    max_bytes: int = 16 * MiB,
    max_depth: int = MAX_JSON_DEPTH,
    allow_nan: bool = False,
) -> Any:
    """A JSON file read with bounds (size, depth, standard numbers only unless ``allow_nan``)."""
    text = read_text(path, kind=kind, max_bytes=max_bytes)
    return load_json_text(text, str(path), max_depth=max_depth, allow_nan=allow_nan)


def finite_number(
    value: Any,
    where: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    """``value`` as a float after checking it is a real number (not bool, not a string), finite
    and within ``[low, high]`` (``(low, high]`` with ``low_open``); ``where`` names it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: expected a number, got {type(value).__name__} {value!r:.40}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{where}: {str(value)[:20]}... is too large") from None
    if not math.isfinite(x):
        raise ValueError(f"{where}: {x} is not a finite number")
    if low is not None and (x < low or (low_open and x == low)):
        op = ">" if low_open else ">="
        raise ValueError(f"{where}: {x:g} must be {op} {low:g}")
    if high is not None and x > high:
        raise ValueError(f"{where}: {x:g} must be <= {high:g}")
    return x
