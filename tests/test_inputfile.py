"""Bounded reading of a user's input files (``laminar/inputfile.py``): FIFOs, devices,
directories, oversized files, deep or non-standard JSON and non-finite numbers are refused with
the file's name, never read, never hung on."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.inputfile import (
    InputFileError,
    depth,
    finite_number,
    leaves,
    load_json,
    load_json_text,
    read_bytes,
)


def test_a_regular_file_reads(tmp_path):
    p = tmp_path / "a.json"
    p.write_text('{"a": [1, 2.5]}')
    assert load_json(p, kind="cost file") == {"a": [1, 2.5]}


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match="not a regular file"):
        read_bytes(fifo, kind="cost file", max_bytes=100)


def test_devices_directories_missing_and_nul_paths_are_refused(tmp_path):
    with pytest.raises(InputFileError, match="not a regular file"):
        read_bytes("/dev/zero", kind="cost file", max_bytes=100)
    with pytest.raises(InputFileError, match="is a directory"):
        read_bytes(tmp_path, kind="cost file", max_bytes=100)
    with pytest.raises(InputFileError, match="cannot read cost file: no such file"):
        read_bytes(tmp_path / "nope", kind="cost file", max_bytes=100)
    with pytest.raises(InputFileError, match="NUL"):
        read_bytes("a\x00b", kind="cost file", max_bytes=100)


def test_a_file_over_its_bound_is_not_read(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * 101)
    with pytest.raises(InputFileError, match="larger than 100"):
        read_bytes(p, kind="cost file", max_bytes=100)


def test_json_without_nan_and_not_too_deep(tmp_path):
    with pytest.raises(InputFileError, match="NaN is not a JSON number"):
        load_json_text('{"a": NaN}', "x.json")
    with pytest.raises(InputFileError, match="Infinity"):
        load_json_text("[-Infinity]", "x.json")
    with pytest.raises(InputFileError, match="nested more than 64"):
        load_json_text("[" * 65 + "]" * 65, "x.json")
    with pytest.raises(InputFileError, match="nested more than"):
        load_json_text("[" * 100_000 + "]" * 100_000, "x.json")
    p = tmp_path / "latin1.json"
    p.write_bytes('{"name": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(InputFileError, match="not UTF-8"):
        load_json(p, kind="model config")


@given(
    st.recursive(
        st.integers() | st.text(max_size=3),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        max_leaves=30,
    )
)
def test_depth_matches_a_recursive_count(value):
    def rec(v):
        if isinstance(v, list | dict):
            items = v.values() if isinstance(v, dict) else v
            return 1 + max((rec(x) for x in items), default=0)
        return 0

    assert depth(value) == rec(value)
    assert load_json_text(json.dumps(value), "x") == value


def test_leaves_name_every_value_by_its_key_path():
    data = {"a": {"b": [1, {"c": 2.5}], "d": []}, "e": None}
    assert sorted(leaves(data), key=lambda x: x[1]) == [
        (1, "a.b[0]"), (2.5, "a.b[1].c"), (None, "e")]  # fmt: skip
    assert list(leaves([7], "x")) == [(7, "x[0]")] and list(leaves(3)) == [(3, "")]


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -float("inf"), "3", True, None, 10**400]
)
def test_finite_number_refuses_what_is_not_a_finite_number(bad):
    with pytest.raises(ValueError, match="a_b"):
        finite_number(bad, "a_b")


def test_finite_number_bounds():
    assert finite_number(3, "x", low=0) == 3.0
    with pytest.raises(ValueError, match="must be > 0"):
        finite_number(0, "x", low=0, low_open=True)
    with pytest.raises(ValueError, match="must be <= 1"):
        finite_number(2, "x", high=1)


@pytest.mark.timeout(20)
def test_a_config_fifo_is_a_config_error(tmp_path):
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"run\.yaml: is not a regular file"):
        load_config(fifo)
