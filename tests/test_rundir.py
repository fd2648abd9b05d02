"""Run directories: ``--out`` never destroys a user's files; outputs appear whole or not at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from laminar.rundir import (
    MARKER,
    OutputError,
    prepare_out,
    run_output,
    staged_dir,
    staged_file,
    staged_output,
)


def _tree(root):
    """Every path under ``root`` with its bytes (files) or None (directories)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_failed_block_leaves_nothing_not_even_the_parents_it_made(tmp_path):
    out = tmp_path / "a" / "b" / "run"
    with pytest.raises(RuntimeError), staged_dir(out) as d:
        (d / "half.csv").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_new_directory_gets_a_marker_listing_what_laminar_wrote(tmp_path):
    out = tmp_path / "run"
    with run_output(out, command="simulate") as d:
        (d / "summary.csv").write_text("x")
        (d / "sub").mkdir()
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "sub", "summary.csv"]
    marker = json.loads((out / MARKER).read_text())
    assert marker["command"] == "simulate" and marker["entries"] == ["sub", "summary.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_previous_run_directory_is_replaced_whole(tmp_path):
    out = tmp_path / "run"
    with run_output(out) as d:
        (d / "old.csv").write_text("old")
    with run_output(out) as d:
        (d / "plots").mkdir()  # a nested Laminar output (laminar plot's default place)
    with run_output(out / "plots") as d:
        (d / "a.png").write_text("png")
    with run_output(out) as d:
        (d / "new.csv").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "new.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_users_directory_survives_untouched(tmp_path):
    out = tmp_path / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.tex").write_text("years of work")
    (out / "sub" / "data.csv").write_text("1,2")
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match=r"not a Laminar run directory.*thesis\.tex.*--force"):
        prepare_out(out)
    assert _tree(tmp_path) == before


def test_a_run_directory_holding_a_users_file_is_refused(tmp_path):
    out = tmp_path / "run"
    with run_output(out) as d:
        (d / "summary.csv").write_text("x")
    (out / "notes.txt").write_text("mine")
    before = _tree(tmp_path)
    with pytest.raises(OutputError, match=r"files Laminar did not write \(notes\.txt\)"):
        prepare_out(out)
    assert _tree(tmp_path) == before


def test_force_writes_into_a_directory_keeping_the_users_files(tmp_path):
    out = tmp_path / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "mine.txt").write_text("mine")
    (out / "a.png").write_text("old")
    with pytest.raises(RuntimeError), run_output(out, force=True) as d:
        (d / "a.png").write_text("half")
        raise RuntimeError("boom")
    assert (out / "a.png").read_text() == "old"  # nothing of the failed block
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "mine.txt", "sub"]
    with run_output(out, force=True) as d:
        (d / "a.png").write_text("new")
        (d / "stale.csv").write_text("s")
        (d / "sub").mkdir()
        (d / "sub" / "b.png").write_text("b")
    assert (out / "a.png").read_text() == "new" and (out / "mine.txt").read_text() == "mine"
    assert (out / "sub" / "b.png").read_text() == "b"
    with run_output(out, force=True) as d:  # a second forced run drops the first run's files
        (d / "a.png").write_text("newer")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "a.png", "mine.txt"]


def test_an_empty_directory_is_filled(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    with run_output(out) as d:
        (d / "x.csv").write_text("x")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "x.csv"]


def test_a_file_is_refused_unless_forced(tmp_path):
    out = tmp_path / "results.csv"
    out.write_text("precious")
    with pytest.raises(OutputError, match="is a file"):
        prepare_out(out)
    assert out.read_text() == "precious"
    with run_output(out, force=True) as d:
        (d / "x.csv").write_text("x")
    assert out.is_dir()


def test_a_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="is a file, not a directory"):
        prepare_out(tmp_path / "f" / "run")


def test_the_current_directory_and_its_parents_are_refused(tmp_path, monkeypatch):
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with run_output("run") as d:  # a run directory below . is fine
        (d / "x").write_text("x")
    with pytest.raises(OutputError, match="current directory"):
        prepare_out(".")
    with pytest.raises(OutputError, match="parent of"):
        prepare_out("..")
    with monkeypatch.context() as m:  # even when . is itself a run directory
        m.chdir(cwd / "run")
        with pytest.raises(OutputError, match="current directory"):
            prepare_out(".")
    with run_output(".", force=True) as d:
        (d / "y").write_text("y")
    assert sorted(p.name for p in cwd.iterdir()) == [MARKER, "run", "y"]


def test_an_unwritable_place_fails_before_any_work(tmp_path):
    t0 = time.perf_counter()
    for place in ("/proc/laminar-run", "/sys/laminar-run"):
        with pytest.raises(OutputError, match=f"{place}: cannot write there"):
            prepare_out(place)
    assert time.perf_counter() - t0 < 1.0
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(OutputError, match="cannot write there"):
            prepare_out(ro / "run")
        assert list(ro.iterdir()) == []


def test_run_directories_get_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        with run_output(tmp_path / "run") as d:
            (d / "x.csv").write_text("x")
    finally:
        os.umask(umask)
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o755


def test_a_target_that_appears_meanwhile_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    target = prepare_out(out)
    with pytest.raises(OutputError, match="appeared"), staged_output(target) as d:
        (d / "x").write_text("x")
        out.mkdir()
        (out / "theirs").write_text("theirs")
    assert [p.name for p in out.iterdir()] == ["theirs"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


# Python's own handlers first: a test runner started in the background inherits SIGINT ignored
# (POSIX: a background job of a non-interactive shell), and the child would sleep through it
_SLOW_WRITER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
from laminar.rundir import run_output
with run_output(sys.argv[1]) as d:
    (d / "half.csv").write_text("x")
    print("staged", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_staging_leaves_nothing(tmp_path, sig):
    out = tmp_path / "deep" / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_WRITER, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "staged"
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []


def test_staged_file(tmp_path):
    out = tmp_path / "f.csv"
    with pytest.raises(ValueError), staged_file(out) as t:
        t.write_text("partial")
        raise ValueError
    assert list(tmp_path.iterdir()) == []
    with staged_file(out) as t:
        t.write_text("whole")
    assert out.read_text() == "whole" and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(OutputError, match="is a directory"), staged_file(tmp_path):
        pass


def test_staged_file_gets_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        with staged_file(tmp_path / "f.csv") as t:
            t.write_text("x")
    finally:
        os.umask(umask)
    assert (tmp_path / "f.csv").stat().st_mode & 0o777 == 0o644


def test_a_full_disk_is_an_output_error_and_leaves_nothing(tmp_path):
    import errno

    with pytest.raises(OutputError, match="No space left"), run_output(tmp_path / "run") as d:
        (d / "part.csv").write_text("x")
        raise OSError(errno.ENOSPC, "No space left on device", str(d / "big.parquet"))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def default_signal_handlers():
    """Python's own SIGTERM/SIGINT handlers for the test, whatever an earlier test installed
    (``ray.init`` installs a SIGTERM handler of its own in its driver, and keeps it)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_a_signal_during_the_commit_waits_until_it_is_done(default_signal_handlers):
    from laminar.staging import signal_guard

    done = []
    with pytest.raises(SystemExit) as e, signal_guard() as guard, guard.hold():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler has run by now, and only took note
        done.append(True)
    assert done and e.value.code == 143
    with pytest.raises(KeyboardInterrupt), signal_guard() as guard:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
