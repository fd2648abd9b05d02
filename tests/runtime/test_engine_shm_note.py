"""An engine's /dev/shm queues are noted on its machine and unlinked by whoever reaps the run
(the guardian, a --resume), even after every process that mapped them is gone."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from laminar.runtime.cluster import nodes

pytestmark = pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.setenv(nodes.SCRATCH_ROOT_ENV, str(tmp_path / "scratch"))
    monkeypatch.setenv(nodes.SHM_ROOT_ENV, str(tmp_path / "shm"))
    return tmp_path


def _shm_file() -> Path:
    path = Path("/dev/shm") / f"psm_test_{uuid.uuid4().hex[:12]}"
    path.write_bytes(b"queue")
    return path


def test_noted_files_are_unlinked_with_the_run(scratch):
    run_id = "r" + uuid.uuid4().hex[:8]
    a, b = _shm_file(), _shm_file()
    try:
        nodes.record_engine_shm(run_id, "rollout-0", [str(a)])
        nodes.record_engine_shm(run_id, "rollout-1", [str(b), "/dev/shm/psm_gone_already"])
        removed = nodes.remove_run_here(run_id)
        assert str(a) in removed and str(b) in removed
        assert not a.exists() and not b.exists()
        assert not nodes.run_dir(run_id, "scratch").exists()
        assert nodes.unlink_engine_shm(run_id) == []  # the note went with the directory
    finally:
        for p in (a, b):
            p.unlink(missing_ok=True)


def test_a_note_never_unlinks_outside_dev_shm(scratch):
    run_id = "r" + uuid.uuid4().hex[:8]
    keep = scratch / "precious"
    keep.write_text("user data")
    inner = Path("/dev/shm") / f"laminar-test-{uuid.uuid4().hex[:8]}"
    inner.mkdir()
    (inner / "x").write_text("x")
    try:
        note = [str(keep), "/dev/shm/../" + str(keep).lstrip("/"), str(inner / "x"), "", "relative"]
        nodes.record_engine_shm(run_id, "rollout-0", note)
        assert nodes.unlink_engine_shm(run_id) == []
        assert keep.exists() and (inner / "x").exists()
    finally:
        (inner / "x").unlink(missing_ok=True)
        os.rmdir(inner)


def test_an_unreadable_note_is_skipped(scratch):
    run_id = "r" + uuid.uuid4().hex[:8]
    a = _shm_file()
    try:
        nodes.record_engine_shm(run_id, "rollout-1", [str(a)])
        where = nodes.run_dir(run_id, "scratch") / nodes.ENGINE_SHM_DIR
        (where / "rollout-0.txt").write_bytes(b"\xff\xfe\x00garbage")
        assert nodes.unlink_engine_shm(run_id) == [str(a)]
    finally:
        a.unlink(missing_ok=True)


def test_a_process_that_entered_the_run_notes_where_the_guardian_looks(tmp_path, monkeypatch):
    """enter_run moves TMPDIR into the run's scratch dir; the note an actor writes after that
    must still land in the run dir the driver's guardian (started before, TMPDIR untouched)
    reads, not in a run dir nested inside the first (CI: 'the guardian left engine shared
    memory')."""
    monkeypatch.delenv(nodes.SCRATCH_ROOT_ENV, raising=False)
    monkeypatch.delenv(nodes.SHM_ROOT_ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    run_id = "r" + uuid.uuid4().hex[:8]
    guardian_view = nodes.run_dir(run_id, "scratch")
    queue = _shm_file()
    saved = dict(os.environ)
    try:
        nodes.enter_run(run_id)  # as an actor does, first thing
        nodes.record_engine_shm(run_id, "rollout-0", [str(queue)])
        assert nodes.run_dir(run_id, "scratch") == guardian_view
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert (guardian_view / nodes.ENGINE_SHM_DIR / "rollout-0.txt").exists()
    try:
        assert nodes.unlink_engine_shm(run_id) == [str(queue)]
        assert not queue.exists()
    finally:
        queue.unlink(missing_ok=True)


def test_an_actor_of_a_local_ray_notes_where_the_guardian_looks(tmp_path, monkeypatch):
    """A local Ray's actors inherit the driver's environment (``RunDirs.env``: TMPDIR already
    inside the run's directory) and then enter the run: their note must land where the guardian,
    started before that environment, reads (CI of stop 34: two engine queues left after a
    SIGKILLed driver, their notes nested one run directory deeper)."""
    import subprocess
    import sys

    from laminar.runtime.run.ray_run import make_dirs

    monkeypatch.delenv(nodes.SCRATCH_ROOT_ENV, raising=False)
    monkeypatch.delenv(nodes.SHM_ROOT_ENV, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    dirs = make_dirs()
    assert dirs.tmp == nodes.run_dir(dirs.run_id, "scratch")  # the guardian's view
    queue = _shm_file()
    actor = (
        "import sys; from laminar.runtime.cluster import nodes\n"
        "nodes.enter_run(sys.argv[1]); nodes.record_engine_shm(sys.argv[1], 'r0', [sys.argv[2]])\n"
        "print(nodes.run_dir(sys.argv[1], 'scratch'), nodes.run_dir(sys.argv[1], 'shm'))"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", actor, dirs.run_id, str(queue)],
            env={**os.environ, **dirs.env()}, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        assert out == [str(dirs.tmp), str(dirs.shm)]
        assert nodes.unlink_engine_shm(dirs.run_id) == [str(queue)]  # in the guardian's env
        assert not queue.exists()
    finally:
        queue.unlink(missing_ok=True)
