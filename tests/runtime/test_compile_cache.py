"""Compile caches live across runs (``laminar.runtime.cluster.nodes.cache_dir``): vLLM's model
inspection and inductor's kernels are not redone by every engine start; a machine without a
writable cache directory keeps them in the run's scratch directory as before."""

from __future__ import annotations

import os

import pytest

from laminar.runtime.cluster import nodes


def test_the_caches_are_the_machines_and_fall_back_to_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv(nodes.CACHE_DIR_ENV, str(tmp_path / "cache"))
    env = nodes.scratch_env("abc123")
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
    assert "laminar-abc123" in env["TMPDIR"]  # sockets stay the run's own
    monkeypatch.delenv(nodes.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert nodes.cache_dir() == tmp_path / "xdg" / "laminar"
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere: the unwritable case needs another user")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv(nodes.CACHE_DIR_ENV, str(locked / "c"))
    assert nodes.cache_dir() is None
    scratch = tmp_path / "run"
    assert nodes.compile_cache_env(scratch)["VLLM_CACHE_ROOT"] == str(scratch / "vllm-cache")


def test_a_cache_path_that_is_a_file_falls_back_to_the_run(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(nodes.CACHE_DIR_ENV, str(tmp_path / "file"))
    assert nodes.cache_dir() is None
    env = nodes.compile_cache_env(tmp_path / "run")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "run" / "inductor")
