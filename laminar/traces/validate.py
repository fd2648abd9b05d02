"""Turn a raw table into a schema trace, or fail with the file, row and column to fix.

Rows are counted from 1 in file order (the CSV header is not a row; in JSONL, row N is line N).
Columns outside the schema are ignored, unless their name looks like a misspelled schema column.
"""

from __future__ import annotations

import difflib
import math

import numpy as np
import pandas as pd

from laminar.errors import TraceError
from laminar.traces.layouts import LAYOUTS, detect_layout, map_layout
from laminar.traces.schema import (
    ALL_COLUMNS,
    FINISH_REASONS,
    GROUP_COLUMNS,
    MAX_VALUES,
    MIN_VALUES,
    NULLABLE_COLUMNS,
    REQUIRED_COLUMNS,
)


def validate_frame(
    raw: pd.DataFrame, path: str, *, max_response_len: int | None = None
) -> pd.DataFrame:
    """The schema trace held in ``raw`` (columns renamed, typed, checked); see module docstring."""
    if len(raw) == 0:
        raise TraceError(path, "the trace is empty (no rows)")
    layout = detect_layout([str(c) for c in raw.columns])
    if layout is not None:
        frame = map_layout(raw, layout)
    else:
        _check_column_names(raw, path)
        frame = raw[[c for c in ALL_COLUMNS if c in raw.columns]]
    frame = frame.reset_index(drop=True)
    out = {name: _coerce(frame[name], name, path) for name in frame.columns if name != "prompt_id"}
    if "prompt_id" in frame.columns:
        out.update(_coerce_prompt_id(frame["prompt_id"], path))
    out = _fill_ungrouped(out, len(frame))
    if "finish_reason" not in out:  # foreign layouts only: derive it from the declared max
        out["finish_reason"] = _derived_finish(out["response_len"], max_response_len)
    df = pd.DataFrame({name: out[name] for name in ALL_COLUMNS if name in out})
    _check_rows(df, path, max_response_len)
    return df


def _check_column_names(raw: pd.DataFrame, path: str) -> None:
    present = [str(c) for c in raw.columns]
    unknown = [c for c in present if c not in ALL_COLUMNS]
    for col in unknown:  # a near-miss of a schema name is a typo, not an extra column
        close = difflib.get_close_matches(col, list(ALL_COLUMNS), n=1, cutoff=0.8)
        if close and close[0] not in present:
            raise TraceError(
                path, f"unknown column; did you mean '{close[0]}'?", row=None, column=col
            )
    has_group = [c for c in GROUP_COLUMNS if c in present]
    needed = [c for c in REQUIRED_COLUMNS if c not in GROUP_COLUMNS or has_group]
    for col in needed:
        if col not in present:
            raise TraceError(path, _missing_message(col, present), column=col)


def _missing_message(col: str, present: list[str]) -> str:
    foreign = "; ".join(f"{lay.name}: {', '.join(lay.columns)}" for lay in LAYOUTS)
    found = ", ".join(c[:40] for c in present[:12]) + (", ..." if len(present) > 12 else "")
    return (
        f"missing column (found: {found}). A trace needs "
        f"{', '.join(REQUIRED_COLUMNS)} (the first three may all be left out), "
        f"or a known serving layout ({foreign})"
    )


def _first_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0]) + 1


def _coerce(col: pd.Series, name: str, path: str) -> pd.Series:
    kind = ALL_COLUMNS[name]
    if kind == "string":
        return _coerce_string(col, name, path)
    missing = col.isna().to_numpy()
    if missing.any() and name not in NULLABLE_COLUMNS:
        raise TraceError(path, "missing value", row=_first_row(missing), column=name)
    if col.dtype == bool or col.dtype == object:  # JSON true/false would pass as 1/0
        bad = col.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(dtype=bool)
        if bad.any():
            raise TraceError(
                path, "expected a number, got a boolean", row=_first_row(bad), column=name
            )
    num = pd.to_numeric(col, errors="coerce")
    bad = num.isna().to_numpy() & ~missing
    if bad.any():
        row = _first_row(bad)
        shown = repr(col.iloc[row - 1])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TraceError(path, f"not a number: {shown}", row=row, column=name)
    values = num.to_numpy(dtype="float64")
    finite = np.isfinite(values) | missing
    if not finite.all():
        raise TraceError(path, "not a finite number", row=_first_row(~finite), column=name)
    low = MIN_VALUES.get(name)
    if low is not None and (below := (values < low) & ~missing).any():
        row = _first_row(below)
        raise TraceError(path, f"{values[row - 1]:g} is below {low:g}", row=row, column=name)
    high = MAX_VALUES.get(name)
    if high is not None and (above := (values > high) & ~missing).any():
        row = _first_row(above)
        raise TraceError(
            path, f"{values[row - 1]:g} is above the bound {int(high):,}", row=row, column=name
        )
    if kind == "int64":
        return _as_int(num, values, name, path)
    return pd.Series(values, dtype="float64")


def _coerce_prompt_id(col: pd.Series, path: str) -> dict[str, pd.Series]:
    """Integer ids as they are; any other id (hash, UUID, negative, huge) is text: numbered
    in order of first appearance, the text kept in ``source_prompt_id``."""
    missing = col.isna().to_numpy()
    if missing.any():
        raise TraceError(path, "missing value", row=_first_row(missing), column="prompt_id")
    is_bool = col.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(dtype=bool)
    num = pd.to_numeric(col, errors="coerce").to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(num) & (num >= 0) & (num <= MAX_VALUES["prompt_id"])
        ok &= num == np.round(num)
    if ok.all() and not is_bool.any():
        return {"prompt_id": _as_int(pd.to_numeric(col), num, "prompt_id", path)}
    text = col.map(_id_text).astype("string").reset_index(drop=True)
    codes, _ = pd.factorize(text)
    return {"prompt_id": pd.Series(codes, dtype="int64"), "source_prompt_id": text}


def _id_text(v: object) -> str:
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))  # 3.0 from a JSON or Parquet float column is the id "3"
    return str(v)


def _as_int(num: pd.Series, values: np.ndarray, name: str, path: str) -> pd.Series:
    if pd.api.types.is_integer_dtype(num.dtype):
        return num.astype("int64").reset_index(drop=True)
    fractional = values != np.round(values)
    if fractional.any():
        row = _first_row(fractional)
        raise TraceError(path, f"not an integer: {values[row - 1]:g}", row=row, column=name)
    return pd.Series(values.astype("int64"), dtype="int64")


def _coerce_string(col: pd.Series, name: str, path: str) -> pd.Series:
    missing = col.isna().to_numpy()
    if missing.any() and name not in NULLABLE_COLUMNS:
        raise TraceError(path, "missing value", row=_first_row(missing), column=name)
    text = col.astype("string").reset_index(drop=True)
    if name == "finish_reason":
        bad = ~text.isin(FINISH_REASONS).to_numpy()
        if bad.any():
            row = _first_row(bad)
            raise TraceError(
                path,
                f"{text.iloc[row - 1]!r} is not one of {', '.join(FINISH_REASONS)}",
                row=row,
                column=name,
            )
    return text


def _fill_ungrouped(out: dict[str, pd.Series], n_rows: int) -> dict[str, pd.Series]:
    """A trace without grouping columns: one single-sample group per row, all in step 0."""
    if any(c in out for c in GROUP_COLUMNS):
        return out
    zeros = pd.Series(np.zeros(n_rows, dtype="int64"))
    filled = {"step": zeros, "prompt_id": pd.Series(np.arange(n_rows, dtype="int64"))}
    return {**filled, "sample_index": zeros.copy(), **out}


def _derived_finish(response_len: pd.Series, max_response_len: int | None) -> pd.Series:
    capped = response_len.to_numpy() >= (max_response_len or np.iinfo(np.int64).max)
    return pd.Series(np.where(capped, "length", "stop"), dtype="string")


def _check_rows(df: pd.DataFrame, path: str, max_response_len: int | None) -> None:
    if max_response_len is not None:
        over = (df["response_len"] > max_response_len).to_numpy()
        if over.any():
            row = _first_row(over)
            raise TraceError(
                path,
                f"{df['response_len'].iloc[row - 1]} tokens is longer than the declared max "
                f"response length {max_response_len} (raise workload.max_response_len)",
                row=row,
                column="response_len",
            )
    dup = df.duplicated(list(GROUP_COLUMNS)).to_numpy()
    if dup.any():
        row = _first_row(dup)
        key = ", ".join(f"{c}={df[c].iloc[row - 1]}" for c in GROUP_COLUMNS)
        raise TraceError(path, f"duplicate trajectory ({key})", row=row, column="sample_index")
    if {"gen_start_s", "gen_end_s"} <= set(df.columns):
        early = (df["gen_end_s"] < df["gen_start_s"]).to_numpy()
        if early.any():
            raise TraceError(
                path, "ends before gen_start_s", row=_first_row(early), column="gen_end_s"
            )
