"""Outputs appear whole or not at all."""

from __future__ import annotations

import pytest

from laminar.rundir import staged_dir, staged_file, staged_files


def test_failed_block_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError), staged_dir(out) as d:
        (d / "half.csv").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_success_replaces_old_output(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with staged_dir(out) as d:
        (d / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_staged_file(tmp_path):
    out = tmp_path / "f.csv"
    with pytest.raises(ValueError), staged_file(out) as t:
        t.write_text("partial")
        raise ValueError
    assert list(tmp_path.iterdir()) == []
    with staged_file(out) as t:
        t.write_text("whole")
    assert out.read_text() == "whole" and len(list(tmp_path.iterdir())) == 1


def test_staged_file_gets_usual_permissions(tmp_path):
    import os

    umask = os.umask(0o022)
    try:
        with staged_file(tmp_path / "f.csv") as t:
            t.write_text("x")
    finally:
        os.umask(umask)
    assert (tmp_path / "f.csv").stat().st_mode & 0o777 == 0o644


def test_staged_files_into_an_existing_directory_keep_its_other_files(tmp_path):
    out = tmp_path / "plots"
    (out / "sub").mkdir(parents=True)
    (out / "mine.txt").write_text("mine")
    (out / "a.png").write_text("old")
    with pytest.raises(RuntimeError), staged_files(out) as d:
        (d / "a.png").write_text("half")
        raise RuntimeError("boom")
    assert (out / "a.png").read_text() == "old"  # nothing of the failed block
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "mine.txt", "sub"]
    with staged_files(out) as d:
        (d / "a.png").write_text("new")
        (d / "sub").mkdir()
        (d / "sub" / "b.png").write_text("b")
    assert (out / "a.png").read_text() == "new" and (out / "mine.txt").read_text() == "mine"
    assert (out / "sub" / "b.png").read_text() == "b"
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "mine.txt", "sub"]


def test_staged_files_into_a_new_directory_is_whole_or_nothing(tmp_path):
    out = tmp_path / "new" / "plots"
    with pytest.raises(RuntimeError), staged_files(out) as d:
        (d / "a.png").write_text("half")
        raise RuntimeError("boom")
    assert not out.exists()
    with staged_files(out) as d:
        (d / "a.png").write_text("whole")
    assert [p.name for p in out.iterdir()] == ["a.png"]
