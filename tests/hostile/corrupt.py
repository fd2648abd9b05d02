"""Damage one file of a run directory the ways disks, crashes and users do (issue 32, "Runs").

:func:`damage` draws (with hypothesis) one way to spoil a file and applies it: emptied,
truncated at any byte, replaced by random bytes, and, by the file's kind, a table with a
column dropped or renamed, a cell set to NaN / inf / a negative / text, a ragged row, a
duplicated header; a JSON object with a key removed or set to a wrong type or NaN; a Parquet
file rewritten with a column dropped or a cell spoiled.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
from hypothesis import strategies as st

BAD_CELLS = ["nan", "NaN", "inf", "-inf", "-1", "-0.5", "abc", "1e400", "", "1.5", "0x10"]
BAD_VALUES = [None, "x", -1, -1.5, 1e308, [], {}, True, float("nan"), float("inf"), [1, "a"]]


def damage(draw: st.DrawFn, path: Path) -> str:
    """Spoil ``path`` in place one way; return how (for the failure report)."""
    raw = path.read_bytes()
    ways = ["empty", "truncate", "random"]
    if path.suffix == ".csv" and raw.strip():
        ways += ["drop column", "rename column", "bad cell", "ragged row", "twice header"]
    elif path.suffix == ".json":
        ways += ["drop key", "bad value", "not an object"]
    elif path.suffix == ".parquet":
        ways += ["drop column", "bad cell"]
    how = draw(st.sampled_from(ways))
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncate":
        path.write_bytes(raw[: draw(st.integers(0, max(0, len(raw) - 1)))])
    elif how == "random":
        path.write_bytes(draw(st.binary(min_size=1, max_size=300)))
    elif path.suffix == ".csv":
        how += _csv(draw, path, how)
    elif path.suffix == ".json":
        how += _json(draw, path, how)
    else:
        how += _parquet(draw, path, how)
    return how


def _csv(draw: st.DrawFn, path: Path, how: str) -> str:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    col = draw(st.integers(0, len(header) - 1))
    if how == "drop column":
        lines = [",".join(f for i, f in enumerate(line.split(",")) if i != col) for line in lines]
    elif how == "rename column":
        header[col] = draw(st.sampled_from(["x", header[(col + 1) % len(header)], ""]))
        lines[0] = ",".join(header)
    elif how == "twice header":
        lines.insert(draw(st.integers(1, len(lines))), lines[0])
    elif len(lines) > 1:
        row = draw(st.integers(1, len(lines) - 1))
        fields = lines[row].split(",")
        if how == "bad cell":
            fields[min(col, len(fields) - 1)] = draw(st.sampled_from(BAD_CELLS))
        else:  # ragged: a field more, or fewer
            fields = [*fields, "7"] if draw(st.booleans()) else fields[:-1]
        lines[row] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    return f" {header[col]!r}"


def _json(draw: st.DrawFn, path: Path, how: str) -> str:
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return ""
    if how == "not an object" or not isinstance(data, dict) or not data:
        path.write_text(json.dumps([data]))
        return ""
    key = draw(st.sampled_from(sorted(data)))
    if how == "drop key":
        del data[key]
    else:
        data[key] = draw(st.sampled_from(BAD_VALUES))
    path.write_text(json.dumps(data))
    return f" {key!r}"


def _parquet(draw: st.DrawFn, path: Path, how: str) -> str:
    frame = pd.read_parquet(io.BytesIO(path.read_bytes()))
    col = draw(st.sampled_from(list(frame.columns)))
    if how == "drop column":
        frame = frame.drop(columns=col)
    elif len(frame):
        frame[col] = frame[col].astype(object)
        frame.loc[draw(st.integers(0, len(frame) - 1)), col] = draw(
            st.sampled_from([float("nan"), float("inf"), -5, "abc", None])
        )
        frame[col] = _uniform(frame[col])
    frame.to_parquet(path, index=False)
    return f" {col!r}"


def _uniform(column: pd.Series) -> pd.Series:
    """A column Parquet can store: numbers where they all are, else text."""
    numbers = pd.to_numeric(column, errors="coerce")
    if numbers.notna().sum() == column.notna().sum():
        return numbers
    return column.astype(str)
