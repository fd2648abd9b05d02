"""Reading and writing traces: lossless round trips, foreign layouts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.traces import read_trace, write_trace
from laminar.traces.schema import ALL_COLUMNS, REQUIRED_COLUMNS


def _with_measured(df: pd.DataFrame) -> pd.DataFrame:
    """Add every measured column, with awkward floats and missing values."""
    rng = np.random.default_rng(1)
    n = len(df)
    out = df.copy()
    start = rng.random(n) * 1e3 + 1e-9
    out["gen_start_s"] = start
    out["gen_end_s"] = start + rng.random(n) / 3.0
    out.loc[::5, "gen_end_s"] = np.nan
    out.loc[::5, "gen_start_s"] = np.nan
    out["replica_id"] = pd.array([f"r{i % 3}" if i % 4 else None for i in range(n)], "string")
    out["weight_version"] = np.arange(n, dtype="int64") % 7
    out["weight_versions"] = pd.array([f"{v};{v + 1}" for v in range(n)], dtype="string")
    out["consumed_version"] = out["weight_version"] + 1
    out["consumed_s"] = np.where(np.arange(n) % 3 == 0, np.nan, 0.1 + 2.0**-40 * np.arange(n))
    out["staleness"] = out["consumed_version"] - out["weight_version"]
    out["reward"] = np.where(np.arange(n) % 7 == 0, np.nan, rng.standard_normal(n) / 3.0)
    out["source_prompt_id"] = pd.array([f"id-{p:x}" for p in df["prompt_id"]], dtype="string")
    return out[[c for c in ALL_COLUMNS if c in out]]


@pytest.mark.parametrize("chain", [("csv", "parquet", "jsonl", "csv"), ("jsonl", "parquet")])
def test_round_trip_is_lossless(tmp_path, tool_trace, chain):
    df = _with_measured(tool_trace)
    assert set(df.columns) == set(ALL_COLUMNS)
    current = df
    for ext in chain:
        path = tmp_path / f"t.{ext}"
        write_trace(current, path)
        current = read_trace(path)
        pd.testing.assert_frame_equal(current, df, check_exact=True)
    assert list(tmp_path.iterdir()), "files written"


def test_read_gives_schema_dtypes(tmp_path, math_trace):
    path = tmp_path / "t.csv"
    write_trace(math_trace, path)
    df = read_trace(path)
    assert list(df.columns) == list(REQUIRED_COLUMNS)
    for name, kind in REQUIRED_COLUMNS.items():
        assert str(df[name].dtype) == kind, name


def test_azure_layout(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:51.1030000,879,200\n"
    )
    df = read_trace(path, max_response_len=200)
    assert df["prompt_len"].tolist() == [374, 396, 879]
    assert df["response_len"].tolist() == [44, 109, 200]
    assert df["finish_reason"].tolist() == ["stop", "stop", "length"]
    assert df["step"].tolist() == [0, 0, 0] and df["sample_index"].tolist() == [0, 0, 0]
    assert df["prompt_id"].tolist() == [0, 1, 2]


def test_vidur_layout_jsonl_and_parquet(tmp_path):
    raw = pd.DataFrame(
        {
            "num_prefill_tokens": [10, 20],
            "num_decode_tokens": [5, 7],
            "num_total_tokens": [15, 27],
            "pd_ratio": [2.0, 2.86],
        }
    )
    raw.to_parquet(tmp_path / "v.parquet")
    raw.to_json(tmp_path / "v.jsonl", orient="records", lines=True)
    for name in ("v.parquet", "v.jsonl"):
        df = read_trace(tmp_path / name)
        assert df["prompt_len"].tolist() == [10, 20] and df["response_len"].tolist() == [5, 7]
        assert df["finish_reason"].tolist() == ["stop", "stop"]


def test_extra_columns_are_ignored(tmp_path, math_trace):
    path = tmp_path / "t.csv"
    math_trace.assign(advantage=1.0).to_csv(path, index=False)  # not a schema column
    assert "advantage" not in read_trace(path).columns


def test_write_is_atomic_on_a_bad_frame(tmp_path, math_trace):
    bad = math_trace.copy()
    bad.loc[3, "response_len"] = -1
    with pytest.raises(Exception, match="row 4"):
        write_trace(bad, tmp_path / "t.parquet")
    assert list(tmp_path.iterdir()) == []
