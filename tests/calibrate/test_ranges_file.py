"""The cost file's ``ranges`` block (issue 31): read and checked by ``laminar.costfile``; files
without one (every file written before it) still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laminar.costfile import read_cost_file
from laminar.errors import ConfigError

OLD = Path(__file__).resolve().parents[2] / "docs" / "fidelity" / "cost.json"
GOOD = {"batch_seqs": {"min": 1, "p50": 12, "p99": 40, "max": 64, "unit": "sequences"},
        "kv_tokens": {"min": 3, "max": 4000}}  # fmt: skip


def _with(tmp_path: Path, ranges) -> Path:
    data = json.loads(OLD.read_text())
    data["ranges"] = ranges
    out = tmp_path / "cost.json"
    out.write_text(json.dumps(data))
    return out


def test_old_file_without_ranges_loads():
    assert "ranges" not in json.loads(OLD.read_text())
    assert read_cost_file(OLD).ranges is None


def test_ranges_are_read(tmp_path):
    got = read_cost_file(_with(tmp_path, GOOD)).ranges
    assert got == {"batch_seqs": {"min": 1.0, "p50": 12.0, "p99": 40.0, "max": 64.0},
                   "kv_tokens": {"min": 3.0, "max": 4000.0}}  # fmt: skip


@pytest.mark.parametrize(
    ("ranges", "key", "says"),
    [
        ({"batch_seqs": {"min": float("nan"), "max": 3}}, "ranges.batch_seqs.min", "finite"),
        ({"kv_tokens": {"min": -1, "max": 3}}, "ranges.kv_tokens.min", "out of range"),
        ({"kv_tokens": {"min": 5, "max": 3}}, "ranges.kv_tokens.min", "above max"),
        (
            {"kv_tokens": {"min": 1, "p50": 9, "p99": 4, "max": 30}},
            "ranges.kv_tokens.p50",
            "above p99",
        ),
        ({"response_len": {"min": "1", "max": 3}}, "ranges.response_len.min", "a number"),
        ({"response_len": {"min": True, "max": 3}}, "ranges.response_len.min", "a number"),
        ({"response_len": {"min": 1, "max": float("inf")}}, "ranges.response_len.max", "finite"),
        ({"response_len": {"min": 1}}, "ranges.response_len.max", "missing"),
        ({"response_len": {"min": 1, "max": 2, "unit": "s"}}, "ranges.response_len.unit", "tokens"),
        (
            {"response_len": {"min": 1, "max": 2, "p90": 1}},
            "ranges.response_len.p90",
            "unknown key",
        ),
        ({"seconds": {"min": 1, "max": 2}}, "ranges.seconds", "unknown quantity"),
        ({"batch_seqs": [1, 2]}, "ranges.batch_seqs", "mapping"),
        ("wide", "ranges", "mapping"),
    ],
)
def test_hostile_ranges_are_refused_naming_file_and_key(tmp_path, ranges, key, says):
    path = _with(tmp_path, ranges)
    with pytest.raises(ConfigError) as err:
        read_cost_file(path)
    text = str(err.value)
    assert str(path) in text and f"{key}:" in text and says in text
