"""The weight path contract: whole versions only, newest first, checksums, cleanup."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from laminar.runtime.weights import (
    MANIFEST_NAME,
    WEIGHTS_NAME,
    ShmWeightStore,
    WeightPublisher,
    WeightSource,
    list_versions,
    verify_version_dir,
)


def _store(tmp_path, **kw):
    return ShmWeightStore(tmp_path / "w", '{"model_type": "llama"}', **kw)


def test_store_implements_both_sides(tmp_path):
    store = _store(tmp_path)
    assert isinstance(store, WeightPublisher) and isinstance(store, WeightSource)
    assert store.latest() is None


def test_latest_is_newest_complete_version_with_config(tmp_path):
    store = _store(tmp_path, keep=2)
    for v in range(4):
        store.publish(v, bytes([v]) * 100)
    version, path = store.latest()
    assert version == 3
    assert Path(path, WEIGHTS_NAME).read_bytes() == bytes([3]) * 100
    assert json.loads(Path(path, "config.json").read_text())["model_type"] == "llama"
    assert [v for v, _ in list_versions(store.root)] == [2, 3]  # only `keep` stay


def test_half_written_version_is_invisible(tmp_path):
    store = _store(tmp_path)
    store.publish(0, b"x" * 10)
    (store.root / ".v1-partial").mkdir()  # what a writer leaves before its rename
    (store.root / ".v1-partial" / WEIGHTS_NAME).write_bytes(b"half")
    assert store.latest()[0] == 0


def test_torn_weights_fail_the_checksum(tmp_path):
    store = _store(tmp_path)
    store.publish(0, b"a" * 64)
    store.publish(1, b"b" * 64)
    v1 = store.root / "v0000000001"
    assert verify_version_dir(v1)
    (v1 / WEIGHTS_NAME).write_bytes(b"b" * 32)
    fresh = _store(tmp_path)
    assert fresh.latest()[0] == 0  # the torn version is skipped
    manifest = json.loads((v1 / MANIFEST_NAME).read_text())
    assert manifest["nbytes"] == 64


def test_republishing_a_version_fails_and_leaves_no_temp(tmp_path):
    store = _store(tmp_path)
    store.publish(5, b"z")
    with pytest.raises(OSError):
        store.publish(5, b"y")
    assert sorted(os.listdir(store.root)) == ["v0000000005"]


def test_concurrent_reader_never_sees_a_torn_version(tmp_path):
    store = _store(tmp_path, keep=50)
    seen, stop = [], threading.Event()

    def reader():
        src = _store(tmp_path, keep=50)
        while not stop.is_set():
            got = src.latest()
            if got is not None:
                seen.append((got[0], Path(got[1], WEIGHTS_NAME).read_bytes()))

    t = threading.Thread(target=reader)
    t.start()
    for v in range(30):
        store.publish(v, bytes([v]) * 50_000)
    stop.set()
    t.join()
    assert all(blob == bytes([v]) * 50_000 for v, blob in seen)


def test_close_removes_everything(tmp_path):
    store = _store(tmp_path)
    store.publish(0, b"x")
    store.close()
    assert not store.root.exists()
