"""Bounded, checked reading of a run directory's tables (CSV, Parquet) and JSON objects.

Every file goes through :mod:`laminar.inputfile` first (a regular file, at most so many bytes:
a FIFO or ``/dev/zero`` in a run directory is refused, not hung on), then its columns are
checked against a spec: present, numbers finite and within bounds, whole where counted. A bad
file is one :class:`RunDirError` naming the file, the row (1 = the first data row) and the
column; a damaged file is never a traceback, and a foreign one (another command's, columns
moved) is refused rather than read with its numbers in the wrong places.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from laminar.errors import LaminarError
from laminar.inputfile import MiB, load_json, read_bytes, read_text

MAX_CSV_BYTES = 512 * MiB  # a million steps, or engine samples, are well under it
MAX_PARQUET_BYTES = 2048 * MiB  # compressed; a trace of tens of millions of trajectories
MAX_JSON_BYTES = 64 * MiB  # summary.json, meta.json (events so far), machine.json


class RunDirError(LaminarError):
    """A run directory, or one of its files, cannot be read as the command needs; the message
    names the directory or file (and the row and column, or the key)."""


def file_error(
    path: str | Path, message: str, *, row: int | None = None, column: str | None = None
) -> RunDirError:
    """``path, row N, column 'c': message`` (the layout of :class:`laminar.errors.TraceError`)."""
    parts = [str(path)]
    if row is not None:
        parts.append(f"row {row}")
    if column is not None:
        parts.append(f"column '{column}'")
    return RunDirError(f"{', '.join(parts)}: {message}")


@dataclass(frozen=True)
class Number:
    """A numeric column (or JSON field): finite, at least ``low`` (``low_open``: above it),
    whole when ``whole``; missing values allowed when ``nullable``."""

    low: float | None = None
    whole: bool = False
    nullable: bool = False
    low_open: bool = False

    def describe(self) -> str:
        what = "a whole number" if self.whole else "a number"
        if self.low is not None:
            what += f" {'>' if self.low_open else '>='} {self.low:g}"
        return what


@dataclass(frozen=True)
class Text:
    """A column of labels (replica ids, kinds): anything, read as it is; an empty cell is
    refused where ``required`` (a label the reader keys on)."""

    required: bool = False


Spec = Mapping[str, Number | Text]
SECONDS = Number(low=0.0)
COUNT = Number(low=0.0, whole=True)


def read_csv(path: Path, spec: Spec, *, kind: str, need: tuple[str, ...] | None = None,
             max_bytes: int = MAX_CSV_BYTES) -> pd.DataFrame:  # fmt: skip
    """The CSV file ``path`` as a table, checked against ``spec`` (:func:`check_frame`). An
    empty file, or a header alone, is an empty table with the spec's columns (the runtime
    writes one when there is nothing to record)."""
    text = read_text(path, kind=kind, max_bytes=max_bytes)
    if not text.strip():
        return pd.DataFrame({c: pd.Series(dtype=_dtype(s)) for c, s in spec.items()})
    header = next(csv.reader(io.StringIO(text)), [])
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise file_error(path, f"column {twice[0]!r} appears twice in the header ({kind})")
    _no_short_rows(text, len(header), path, kind)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # pandas warns where rows and header disagree
            frame = pd.read_csv(io.StringIO(text), index_col=False, low_memory=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame({c: pd.Series(dtype=_dtype(s)) for c, s in spec.items()})
    except (ValueError, Warning, csv.Error, OverflowError, IndexError, TypeError) as e:
        raise file_error(path, f"not a readable {kind} ({_first_line(e)})") from None
    return check_frame(frame, spec, path, need=need)


def _no_short_rows(text: str, width: int, path: Path, kind: str) -> None:
    """Refuse a row with fewer fields than the header (pandas would fill them in as missing:
    a file cut off mid-row, by a crash or a full disk, would be read as if whole)."""
    try:
        for i, row in enumerate(csv.reader(io.StringIO(text))):
            if i and row and len(row) < width:
                raise file_error(
                    path, f"{len(row)} fields, the header has {width} (a truncated or ragged "
                    f"row; {kind})", row=i,
                )  # fmt: skip
    except csv.Error as e:
        raise file_error(path, f"not a readable {kind} ({_first_line(e)})") from None


def read_parquet(path: Path, spec: Spec, *, kind: str, need: tuple[str, ...] | None = None,
                 max_bytes: int = MAX_PARQUET_BYTES) -> pd.DataFrame:  # fmt: skip
    """The Parquet file ``path`` as a table, checked against ``spec``."""
    import pyarrow as pa

    raw = read_bytes(path, kind=kind, max_bytes=max_bytes)
    try:
        frame = pd.read_parquet(io.BytesIO(raw))
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError) as e:
        raise file_error(path, f"not a readable {kind} ({_first_line(e)})") from None
    return check_frame(frame, spec, path, need=need)


def check_frame(frame: pd.DataFrame, spec: Spec, path: Path, *,
                need: tuple[str, ...] | None = None) -> pd.DataFrame:  # fmt: skip
    """``frame`` after checking that it has the columns ``need`` (default: all of ``spec``)
    and that every column of ``spec`` it has holds what the spec says; numeric columns come
    back as numbers."""
    need = tuple(spec) if need is None else need
    if frame.empty:  # a header alone (``kind`` when there were no events): nothing to check
        missing = {c: pd.Series(dtype=_dtype(s)) for c, s in spec.items() if c not in frame}
        return frame.reset_index(drop=True).assign(**missing)
    for name in need:
        if name not in frame.columns:
            raise file_error(path, "missing column", column=name)
    frame = frame.reset_index(drop=True)
    for name, check in spec.items():
        if name in frame.columns and isinstance(check, Number):
            frame[name] = _numbers(frame[name], check, path, name)
        elif name in frame.columns and check.required:
            column = frame[name]
            empty = (column.isna() | (column.astype(object).astype(str).str.strip() == ""))
            if empty.any():
                row = int(np.flatnonzero(empty.to_numpy())[0])
                raise file_error(path, "expected a label, got an empty or NaN cell", row=row + 1,
                                 column=name)  # fmt: skip
    return frame


def _numbers(column: pd.Series, check: Number, path: Path, name: str) -> pd.Series:
    try:
        values = pd.to_numeric(column, errors="coerce").astype(float)
    except (TypeError, ValueError):  # lists, mappings, bytes in a Parquet column
        values = pd.Series(np.nan, index=column.index)
    x = values.to_numpy()
    missing = np.isnan(x) & column.isna().to_numpy()
    bad = ~np.isfinite(x) & ~(missing if check.nullable else np.zeros(len(x), bool))
    finite = np.where(np.isfinite(x), x, 0.0)
    if check.low is not None:
        bad |= np.isfinite(x) & ((finite < check.low) | (check.low_open & (finite == check.low)))
    if check.whole:
        bad |= np.isfinite(x) & (np.floor(finite) != finite)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        got = column.iloc[row]
        raise file_error(path, f"expected {check.describe()}, got {_shown(got)}", row=row + 1,
                         column=name)  # fmt: skip
    if column.dtype.kind in "iuf":
        return column  # already numbers: kept as written (whole numbers stay integers)
    if check.whole and np.isfinite(x).all():
        return values.astype(np.int64)
    return values


def _shown(value: Any) -> str:
    if isinstance(value, float | np.floating):  # numpy's repr names its type: not for users
        value = float(value)
        if math.isnan(value):
            return "an empty cell (or NaN)"
    elif isinstance(value, np.integer):
        value = int(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _dtype(check: Number | Text) -> str:
    return "float64" if isinstance(check, Number) else "object"


# JSON ------------------------------------------------------------------------------------------


def read_json_object(path: Path, *, kind: str, max_bytes: int = MAX_JSON_BYTES,
                     nan: bool = False) -> dict:  # fmt: skip
    """The JSON object in ``path`` (bounded); ``nan``: Python's ``NaN``/``Infinity`` are
    accepted (the runtime's own files carry them where a figure is unknown)."""
    data = load_json(path, kind=kind, max_bytes=max_bytes, allow_nan=nan)
    if not isinstance(data, dict):
        raise file_error(path, f"expected a JSON object ({kind}), found {type(data).__name__}")
    return data


def field(data: Mapping, key: str, check: Number, path: Path, *, where: str = "",
          default: float | None = None) -> float | None:  # fmt: skip
    """The number ``data[key]`` after ``check`` (``default`` when absent or null and the
    check is nullable)."""
    name = f"{where}{key}"
    value = data.get(key)
    if value is None:
        if check.nullable or key not in data:
            return default
        raise file_error(path, f"{name}: expected {check.describe()}, got null")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise file_error(path, f"{name}: expected {check.describe()}, got {_shown(value)}")
    x = float(value)
    if math.isnan(x) and check.nullable:
        return default
    ok = math.isfinite(x) and (check.low is None or x > check.low or
                               (x == check.low and not check.low_open))  # fmt: skip
    if not ok or (check.whole and x != math.floor(x)):
        raise file_error(path, f"{name}: expected {check.describe()}, got {_shown(value)}")
    return x


def text_field(data: Mapping, key: str, path: Path, *, where: str = "",
               choices: tuple[str, ...] = ()) -> str | None:  # fmt: skip
    """The string ``data[key]`` (None when absent or null), one of ``choices`` if given."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or (choices and value not in choices):
        want = f"one of {', '.join(choices)}" if choices else "text"
        raise file_error(path, f"{where}{key}: expected {want}, got {_shown(value)}")
    return value
