"""RelayStore: versions appear whole, in the layout of laminar.runtime.weights; files for the
next version are allocated ahead; nothing is left in shared memory."""

from __future__ import annotations

import os

import pytest

from laminar.runtime.relay.store import RelayStore
from laminar.runtime.relay.stream import digest
from laminar.runtime.weights import ShmWeightStore, list_versions, verify_version_dir


def _commit(store: RelayStore, version: int, data: bytes):
    mapped = store.new_file(len(data))
    mapped.view()[:] = data
    d = digest(memoryview(data))
    return store.commit(version, mapped, {"config.json": "{}"}, {"nbytes": len(data), **d})


def test_committed_versions_read_like_the_runtime_store(shm_base):
    store = RelayStore(shm_base, keep=2)
    assert store.latest() is None
    for v in range(4):
        path = _commit(store, v, bytes([v]) * 5000)
        assert verify_version_dir(path)
    assert len(list_versions(store.root)) == 4  # commit leaves the old ones to gc
    store.gc()
    assert [v for v, _ in list_versions(store.root)] == [2, 3]  # keep=2
    assert store.latest()[0] == 3 and store.has(3) and not store.has(1)
    # the runtime's own reader reads a relay store as is
    assert ShmWeightStore(store.root, "{}").latest()[0] == 3
    store.close()
    assert not shm_base.exists()


def test_only_dot_files_while_a_version_is_in_flight(shm_base):
    store = RelayStore(shm_base)
    mapped = store.new_file(100)
    mapped.view()[:10] = b"x" * 10
    assert all(name.startswith(".") for name in os.listdir(shm_base))
    assert store.latest() is None
    store.discard(mapped)
    assert os.listdir(shm_base) == []


def test_spare_is_used_when_it_fits(shm_base):
    store = RelayStore(shm_base)
    store.prepare_spare(4096)
    spare = store.new_file(4096)
    assert spare.path.name.startswith(".spare-")
    other = store.new_file(100)
    assert other.path.name.startswith(".new-")
    for m in (spare, other):
        store.discard(m)
    store.close()


def test_inbox_is_adopted_only_from_this_store(shm_base, tmp_path):
    store = RelayStore(shm_base)
    path = store.lend_inbox(64)
    assert path.parent == store.root and path.stat().st_size == 64
    with pytest.raises(ValueError, match="holds 64 bytes"):
        store.adopt_file(path, 65)
    stray = tmp_path / ".inbox-x"
    stray.write_bytes(b"x" * 64)
    with pytest.raises(ValueError, match="not an inbox"):
        store.adopt_file(stray, 64)
    mapped = store.adopt_file(path, 64)
    assert bytes(mapped.view()) == b"\0" * 64
    store.discard(mapped)
    store.close()
