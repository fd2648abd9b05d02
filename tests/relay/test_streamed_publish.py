"""The streamed export into the relay tier (``RelayPublisher.begin``/``commit``): the trainer's
ranks write straight into the master's inbox, the master verifies once and broadcasts; every
relay ends with the bytes written; a master on another machine gets them streamed."""

from __future__ import annotations

import mmap
import os

import pytest

from laminar.runtime.relay.proc import RelayProcesses
from laminar.runtime.weights import StreamPublisher
from tests.relay.conftest import blob_for
from tests.relay.test_broadcast import assert_holds, tier


def _fill(path: str, blob: bytes, parts: int = 3) -> None:
    """What the ranks do: each maps the file and writes its own byte range."""
    step = -(-len(blob) // parts)
    for i in range(parts):
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, len(blob), flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
        mm[i * step : (i + 1) * step] = blob[i * step : (i + 1) * step]
        mm.close()


@pytest.mark.slow
@pytest.mark.parametrize("local_master", [True, False])
def test_streamed_versions_reach_every_relay(shm_base, local_master):
    with RelayProcesses(3, shm_base, transport="tcp", keep=2) as relays:
        pub = tier(relays, "tcp", chunks=5)
        if not local_master:
            pub.machine = "elsewhere"  # the master relay is on another machine than the trainer
        assert isinstance(pub, StreamPublisher)
        try:
            for version in range(3):
                blob = blob_for(version, (2 << 20) + 333)
                path = pub.begin(version, len(blob))
                assert os.path.getsize(path) == len(blob)
                _fill(path, blob)
                pub.commit(version, path)
                result = pub.wait(version, timeout_s=60)
                assert set(result["committed"]) == {r.id for r in relays.infos}
                for info in relays.infos:
                    assert_holds(info.root, version, blob)
        finally:
            pub.close()
