"""Bad trace files: every case names the file, row and column, exits 2, and writes nothing."""

from __future__ import annotations

import pandas as pd
import pytest

from laminar.cli import main
from laminar.errors import TraceError
from laminar.traces import read_trace


def _good(rows: int = 5) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [0] * rows,
            "prompt_id": [0] * rows,
            "sample_index": list(range(rows)),
            "prompt_len": [100] * rows,
            "response_len": [10 * (i + 1) for i in range(rows)],
            "finish_reason": ["stop"] * rows,
        }
    )


def _write_raw(df: pd.DataFrame, path) -> None:
    """Write without validation (as another tool would), in the format of the extension."""
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        # A column mixing text and numbers is stored as text, as a spreadsheet export would.
        mixed = [c for c in df if df[c].map(type).nunique() > 1 and df[c].map(type).eq(str).any()]
        df.astype({c: str for c in mixed}).to_parquet(path, index=False)
    else:
        df.to_json(path, orient="records", lines=True)


def _set(df: pd.DataFrame, row: int, col: str, value) -> pd.DataFrame:
    out = df.astype({col: object})
    out.at[row, col] = value
    return out


# (case name, how to break the good frame, the row and column the message must name)
CASES = [
    ("not a number", lambda d: _set(d, 2, "prompt_len", "abc"), "row 3, column 'prompt_len'"),
    ("negative", lambda d: _set(d, 3, "response_len", -4), "row 4, column 'response_len'"),
    ("fractional", lambda d: _set(d, 1, "response_len", 12.5), "row 2, column 'response_len'"),
    ("missing value", lambda d: _set(d, 4, "step", None), "row 5, column 'step'"),
    ("finish reason", lambda d: _set(d, 0, "finish_reason", "eos"), "row 1, column 'finish_rea"),
    ("too long", lambda d: _set(d, 2, "response_len", 5000), "row 3, column 'response_len'"),
    ("duplicate", lambda d: _set(d, 1, "sample_index", 0), "row 2, column 'sample_index'"),
    ("missing column", lambda d: d.drop(columns="response_len"), "column 'response_len'"),
    (
        "misspelled column",
        lambda d: d.rename(columns={"response_len": "respone_len"}),
        "column 'respone_len': unknown column; did you mean 'response_len'",
    ),
]


@pytest.mark.parametrize("ext", ["csv", "parquet", "jsonl"])
@pytest.mark.parametrize("case, breaker, where", CASES, ids=[c[0] for c in CASES])
def test_bad_rows_and_columns(tmp_path, ext, case, breaker, where):
    path = tmp_path / f"bad.{ext}"
    _write_raw(breaker(_good()), path)
    with pytest.raises(TraceError) as e:
        read_trace(path, max_response_len=4096)
    assert str(e.value).startswith(str(path)) and where in str(e.value), str(e.value)


def test_good_frame_passes_in_every_format(tmp_path):
    for ext in ("csv", "parquet", "jsonl"):
        _write_raw(_good(), tmp_path / f"ok.{ext}")
        assert len(read_trace(tmp_path / f"ok.{ext}", max_response_len=4096)) == 5


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.csv", b"", "empty"),
        (
            "header.csv",
            b"step,prompt_id,sample_index,prompt_len,response_len,finish_reason\n",
            "empty",
        ),
        ("empty.jsonl", b"\n", "empty"),
        ("trace.txt", b"step\n1\n", "unsupported extension '.txt'"),
        ("noext", b"step\n1\n", "unsupported extension"),
        ("broken.parquet", b"PAR1 this is not parquet", "unreadable Parquet"),
        ("broken.jsonl", b'{"step": 0}\n{"step": \n', "row 2: invalid JSON"),
        ("list.jsonl", b"[1, 2]\n", "row 1: each line must be a JSON object"),
        (
            "bool.jsonl",
            b'{"step": 0, "prompt_id": 0, "sample_index": 0, "prompt_len": true, '
            b'"response_len": 3, "finish_reason": "stop"}\n',
            "row 1, column 'prompt_len'",
        ),
    ],
)
def test_bad_files(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_trace(path)


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "nope.csv")


@pytest.mark.parametrize("command", ["show", "fit"])
def test_cli_exits_2_and_writes_nothing(tmp_path, capsys, command):
    bad = tmp_path / "bad.csv"
    _write_raw(_set(_good(), 2, "prompt_len", -1), bad)
    out = tmp_path / "out" / "hist.png"
    argv = ["trace", command, str(bad)] + (["--plot", str(out)] if command == "show" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "row 3, column 'prompt_len'" in err and str(bad) in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bad.csv"]
    assert not out.exists()


def test_cli_synth_with_a_bad_preset_writes_nothing(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["trace", "synth", "nope", "-o", str(out)]) == 2
    assert "unknown synthetic preset" in capsys.readouterr().err
    assert main(["trace", "synth", "dapo-math", "-o", str(tmp_path / "t.xlsx")]) == 2
    assert list(tmp_path.iterdir()) == []
