"""Read and write traces as CSV, Parquet or JSONL (chosen by the file extension)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from laminar.errors import TraceError
from laminar.rundir import staged_file
from laminar.traces.schema import EXTENSIONS
from laminar.traces.validate import validate_frame


def _extension(path: Path) -> str:
    ext = path.suffix.lower()
    if ext not in EXTENSIONS:
        raise TraceError(
            str(path), f"unsupported extension {ext or '(none)'!r}; use {', '.join(EXTENSIONS)}"
        )
    return ext


def read_trace(path: str | Path, *, max_response_len: int | None = None) -> pd.DataFrame:
    """The validated schema trace in ``path`` (CSV, Parquet or JSONL; native or foreign layout).

    ``max_response_len`` (tokens), when given, is the declared cap: longer responses are an
    error, and foreign traces mark responses at the cap ``finish_reason = "length"``.
    Raises ``TraceError`` naming the file, and the row and column where the problem is.
    """
    path = Path(path)
    if "\x00" in str(path):
        raise TraceError(repr(str(path)), "a path cannot hold a NUL character")
    ext = _extension(path)
    if not path.is_file():
        raise TraceError(str(path), "not a file" if path.exists() else "no such file")
    if path.stat().st_size == 0:
        raise TraceError(str(path), "the trace is empty (0 bytes)")
    reader = {".csv": _read_csv, ".parquet": _read_parquet, ".jsonl": _read_jsonl}[ext]
    try:
        raw = reader(path)
    except OSError as e:
        raise TraceError(str(path), f"cannot read: {e.strerror or e}") from None
    except RecursionError:
        raise TraceError(str(path), "nested too deeply to be a trace") from None
    return validate_frame(raw, str(path), max_response_len=max_response_len)


def _read_csv(path: Path) -> pd.DataFrame:
    # Everything as text first, so a bad cell is reported by the validator with its row;
    # float text is parsed exactly, which keeps CSV round trips lossless.
    try:
        return pd.read_csv(path, dtype=str, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise TraceError(str(path), "the trace is empty (no header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise TraceError(str(path), f"cannot parse CSV: {_clip(str(e))}") from None


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError) as e:
        raise TraceError(str(path), f"unreadable Parquet file: {_clip(str(e))}") from None


def _read_jsonl(path: Path) -> pd.DataFrame:
    records = []
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as e:
        raise TraceError(str(path), f"not UTF-8 text: {e}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(str(path), f"invalid JSON: {e.msg}", row=number) from None
        if not isinstance(record, dict):
            raise TraceError(str(path), "each line must be a JSON object", row=number)
        records.append(record)
    return pd.DataFrame.from_records(records)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_trace(df: pd.DataFrame, path: str | Path) -> None:
    """Validate ``df`` and write it to ``path`` (format by extension), whole or not at all."""
    path = Path(path)
    ext = _extension(path)
    trace = validate_frame(df, str(path))
    with staged_file(path) as tmp:
        if ext == ".csv":
            trace.to_csv(tmp, index=False)
        elif ext == ".parquet":
            trace.to_parquet(tmp, index=False, engine="pyarrow", compression="zstd")
        else:
            _write_jsonl(trace, tmp)


def _write_jsonl(trace: pd.DataFrame, path: Path) -> None:
    # json.dumps writes floats with repr (shortest exact form), so JSONL round trips are
    # lossless; pandas' own writer rounds to 10 digits.
    columns = list(trace.columns)
    data = [trace[c].astype(object).tolist() for c in columns]
    with path.open("w") as f:
        for row in zip(*data, strict=True):
            record = {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")


def _json_value(v: object) -> object:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v
