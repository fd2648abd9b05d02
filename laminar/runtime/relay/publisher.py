"""The weight path over the relay tier: :class:`RelayPublisher` and :class:`RelaySource`.

They implement the contract of :mod:`laminar.runtime.weights` (paper §4.2):

- ``RelayPublisher.publish(version, blob)`` copies the blob once into an inbox file the master
  relay lent it (allocated and mapped ahead of time, so the copy runs at memory speed), tells
  the master to broadcast it and returns: that copy is the actor's whole stall, whatever the
  number of relays. When the master is not on the trainer's machine (it died and the policy
  elected a relay elsewhere), the trainer streams the version to it itself, in the background.
- ``RelaySource(root).latest()`` is the newest version the relay on this machine committed:
  whole (a rename of a verified directory) and checked against its SHA-256 once.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from laminar.policy.relay import optimal_chunks
from laminar.runtime.relay.control import ControlClient, ControlError
from laminar.runtime.relay.loop import shared_loop
from laminar.runtime.relay.manager import RelayManager
from laminar.runtime.relay.node import RelayInfo
from laminar.runtime.relay.store import Mapped, map_file
from laminar.runtime.relay.stream import ChainSender, Layout, LocalSource, layout_for, new_result
from laminar.runtime.relay.transports import make_transport
from laminar.runtime.weights import (
    CONFIG_NAME,
    complete_version_dir,
    list_versions,
    verify_version_dir,
)

VERSIONS_TRACKED = 32  # recent versions whose broadcast `wait` can still report


class RelayError(RuntimeError):
    """The relay tier cannot take a version (no relay left alive)."""


class RelayPublisher:
    """The trainer's side of the relay tier (a ``WeightPublisher``)."""

    def __init__(
        self,
        manager: RelayManager,
        *,
        config_json: str,
        machine: str,
        transport: str = "tcp",
        ucx_tls: str = "tcp,self",
        chunks: int = 0,
        alpha_s: float = 1e-4,
        link_bytes_per_s: float = 1e9,
        min_chunk_bytes: int = 1 << 16,
        my_id: str = "trainer",
        pace_bytes_per_s: float = 0.0,
    ):
        self.manager = manager
        manager.on_master_change = self._on_master_change
        self.config_json, self.machine = config_json, machine
        self.chunks, self.alpha_s, self.link_bytes_per_s = chunks, alpha_s, link_bytes_per_s
        self.min_chunk_bytes = min_chunk_bytes
        self._transport_args = (transport, ucx_tls, pace_bytes_per_s)
        self._my_id = my_id
        self._sender: ChainSender | None = None
        self._lock = threading.RLock()
        # two background threads, started now (off any publish): one only reads the master's
        # acknowledgements and frees the hand-over channel, so it never waits on anything the
        # trainer holds; the other borrows the next inbox (or reports a lost master)
        self._acks = ThreadPoolExecutor(1, thread_name_prefix="relay-ack")
        self._background = ThreadPoolExecutor(1, thread_name_prefix="relay-inbox")
        for pool in (self._acks, self._background):
            pool.submit(lambda: None)
        # (relay id, channel) -> connection: the hand-over has a channel of its own, as its lock
        # is held from the send on the trainer's thread to the acknowledgement read on the
        # background thread; requests sharing it would wait on work queued behind them
        self._clients: dict[tuple[str, str], tuple[threading.Lock, ControlClient]] = {}
        self._clients_lock = threading.Lock()
        self._slot: tuple[str, Mapped] | None = None  # (relay id, mapped inbox) ready to fill
        self._last: tuple[int, bytes, int] | None = None
        self._handed: dict[int, str] = {}  # version -> master relay it was handed to
        self._streams: dict[int, Future] = {}  # version -> background stream from the trainer
        self._filling: dict[int, tuple[RelayInfo | None, Mapped | None]] = {}  # begun versions
        self.stalls_s: list[float] = []
        self.master_changes: list[dict] = []

    # --- the contract ---------------------------------------------------------------------------
    def publish(self, version: int, blob: bytes) -> None:
        """Hand ``version`` to the master relay; return once the trainer may go on."""
        t0 = time.monotonic()
        with self._lock:
            chunk_bytes = self.chunk_bytes(len(blob))
            self._last = (version, blob, chunk_bytes)
            while True:
                master = self.manager.master()
                try:
                    if master.machine == self.machine:
                        self._hand_over(master, version, blob, chunk_bytes, t0)
                    else:
                        self._stream(master, version, blob, chunk_bytes, t0)
                    break
                except ControlError:
                    self.manager.report_dead({master.id}, "unreachable at publish")
                    if version in self._streams:
                        break  # the master change already re-sent this version
                    if self.manager.master().id == master.id:
                        raise RelayError("no relay alive to take the weights") from None
        self.stalls_s.append(time.monotonic() - t0)

    def begin(self, version: int, nbytes: int) -> str:
        """Streamed export (``StreamPublisher``): the master's inbox, mapped here, for the
        trainer's ranks on this machine to fill; a local scratch file when the master is away."""
        with self._lock:
            master = self.manager.master()
            if master.machine == self.machine:
                path, mapped = self._take_slot(master, nbytes)
                self._filling[version] = (master, mapped)
                return path
        fd, path = tempfile.mkstemp(prefix=f".stream-v{version}-", dir=_scratch_dir())
        os.ftruncate(fd, nbytes)
        os.close(fd)
        self._filling[version] = (None, None)
        return path

    def commit(self, version: int, path: str) -> None:
        """Hand the filled file over: the master verifies it once, commits and broadcasts it.
        A streamed version is not kept for a re-send after a master change (that would be the
        whole-model copy streaming avoids): the next version reaches the new master."""
        t0 = time.monotonic()
        master, mapped = self._filling.pop(version)
        with self._lock:
            self._last = None
            nbytes = os.path.getsize(path)
            if mapped is not None:
                try:
                    self._announce(master, version, path, mapped, self.chunk_bytes(nbytes), t0)
                except ControlError:
                    self.manager.report_dead({master.id}, "unreachable at publish")
                    raise RelayError(f"master relay {master.id} lost during publish") from None
            else:
                blob = Path(path).read_bytes()
                os.unlink(path)
                self._stream(self.manager.master(), version, blob, self.chunk_bytes(nbytes), t0)
        self.stalls_s.append(time.monotonic() - t0)

    def chunk_bytes(self, nbytes: int) -> int:
        """Chunk size for ``nbytes`` on the current chain: k from ``optimal_chunks`` (App. D.3)
        unless the config fixes it."""
        p = len(self.manager.chain.nodes)
        cap = max(1, nbytes // self.min_chunk_bytes)
        k = self.chunks or optimal_chunks(
            p, nbytes, self.alpha_s, 1.0 / self.link_bytes_per_s, max_chunks=cap
        )
        return layout_for(nbytes, k).chunk_bytes

    def wait(self, version: int, timeout_s: float = 60.0) -> dict:
        """Block until ``version`` reached every live relay; return who committed it and when
        (monotonic times), with the relays dropped and the chain repairs on the way."""
        deadline = time.monotonic() + timeout_s
        while True:
            fut = self._streams.get(version)
            if fut is not None:
                try:
                    return fut.result(max(0.0, deadline - time.monotonic()))
                except CancelledError:
                    return {**new_result(), "skipped": True}  # a newer version replaced it
            master_id = self._handed.get(version)
            if master_id is None:
                raise KeyError(f"version {version} was never published")
            left = max(0.1, deadline - time.monotonic())
            try:
                reply = self._request(
                    self.manager.relays[master_id],
                    {"op": "result", "version": version, "timeout_s": left},
                    timeout_s=left + 5.0,
                )
                if not reply.get("pending"):
                    return reply
            except ControlError:
                time.sleep(0.05)  # the master died: the re-sent stream shows up in _streams
            if time.monotonic() > deadline:
                raise TimeoutError(f"version {version} not broadcast within {timeout_s} s")

    def ready(self, timeout_s: float = 60.0) -> bool:
        """Block until the next inbox is lent and mapped, so the next publish is one copy."""
        deadline = time.monotonic() + timeout_s
        while self._last is not None and self._slot is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        """Stop the heartbeats, close links and unmap the spare inbox."""
        self.manager.stop()
        self._acks.shutdown(wait=True, cancel_futures=True)
        self._background.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            if self._slot is not None:
                self._slot[1].close()
                self._slot = None
        if self._sender is not None:
            shared_loop().run(self._sender.close(), 10.0)
        for _, client in self._clients.values():
            client.close()

    # --- local master: one copy -----------------------------------------------------------------
    def _hand_over(
        self, master: RelayInfo, version: int, blob: bytes, chunk_bytes: int, t0: float
    ) -> None:
        path, mapped = self._take_slot(master, len(blob))
        np.copyto(np.frombuffer(mapped.mm, np.uint8, len(blob)), np.frombuffer(blob, np.uint8))
        self._announce(master, version, path, mapped, chunk_bytes, t0)

    def _announce(
        self,
        master: RelayInfo,
        version: int,
        path: str,
        mapped: Mapped,
        chunk_bytes: int,
        t0: float,
    ) -> None:
        """Tell the master its inbox at ``path`` holds ``version``: it verifies and broadcasts."""
        nbytes = mapped.nbytes
        chain = [r.peer.to_json() for r in self.manager.chain_infos()]
        lock, client = self._client(master, "broadcast")
        lock.acquire()  # released by the thread that reads the acknowledgement
        try:
            client.send(
                {
                    "op": "broadcast",
                    "version": version,
                    "path": path,
                    "nbytes": nbytes,
                    "chunk_bytes": chunk_bytes,
                    "chain": chain,
                    "files": {CONFIG_NAME: self.config_json},
                    "t0": t0,
                }
            )
        except BaseException:
            lock.release()
            raise
        self._handed[version] = master.id
        for old in sorted(self._handed)[:-VERSIONS_TRACKED]:
            self._handed.pop(old)
        # a thread already running: starting one can take 0.1 s+ on a loaded machine
        self._acks.submit(self._read_ack, master, nbytes, mapped, lock, client)

    def _read_ack(self, master, nbytes, used: Mapped, lock, client) -> None:
        """Off the trainer's path (its stall ends with the copy and one socket write): read the
        master's acknowledgement and free the channel for the next hand-over; the rest goes to
        the other thread, as it may wait on the trainer (which may be waiting on this channel)."""
        lost = False
        try:
            client.receive(timeout_s=60.0)
        except ControlError as e:
            lost = not isinstance(e.__cause__, TimeoutError)  # slow: for the heartbeats to judge
        except RuntimeError:
            pass  # the master refused the version; `wait` reports why
        finally:
            lock.release()
        self._background.submit(self._after_ack, master, nbytes, used, lost)

    def _after_ack(self, master, nbytes, used: Mapped, lost: bool) -> None:
        if lost:
            used.close()
            self.manager.report_dead({master.id}, "lost while taking a version")
            return
        self._refill(master, nbytes, used)

    def _take_slot(self, master: RelayInfo, nbytes: int) -> tuple[str, Mapped]:
        slot, self._slot = self._slot, None
        if slot is not None and slot[0] == master.id and slot[1].nbytes == nbytes:
            return str(slot[1].path), slot[1]
        if slot is not None:
            slot[1].close()
        return self._lend(master, nbytes)

    def _lend(self, master: RelayInfo, nbytes: int) -> tuple[str, Mapped]:
        path = self._request(master, {"op": "lend_inbox", "nbytes": nbytes})["path"]
        return path, map_file(path, nbytes, create=False, populate=True)

    def _refill(self, master: RelayInfo, nbytes: int, used: Mapped) -> None:
        """Off the trainer's path: unmap the filled inbox, borrow and map the next one."""
        used.close()
        try:
            _path, mapped = self._lend(master, nbytes)
        except (ControlError, OSError):
            return  # the next publish borrows one itself
        with self._lock:
            if self._slot is None and self.manager.master().id == master.id:
                self._slot = (master.id, mapped)
                return
        mapped.close()

    # --- remote master: the trainer streams -----------------------------------------------------
    def _stream(
        self, master: RelayInfo, version: int, blob: bytes, chunk_bytes: int, t0: float
    ) -> None:
        layout = Layout(len(blob), chunk_bytes)
        header = {
            "version": version,
            "nbytes": len(blob),
            "chunk_bytes": chunk_bytes,
            "files": {CONFIG_NAME: self.config_json},
            "t0": t0,
            "from": self._my_id,
        }
        rest = [r.peer for r in self.manager.chain_infos()]
        sender = self._chain_sender()

        async def send() -> dict:
            result = await sender.forward(LocalSource(memoryview(blob), layout), header, rest)
            return {**result, "t0": t0, "t_end": time.monotonic(), "k": layout.k}

        for older, fut in self._streams.items():  # newest wins, as at the master
            if older < version:
                fut.cancel()
        self._streams[version] = shared_loop().submit(send())
        for old in sorted(self._streams)[:-VERSIONS_TRACKED]:
            self._streams.pop(old)

    def _chain_sender(self) -> ChainSender:
        if self._sender is None:
            kind, tls, pace = self._transport_args
            self._sender = ChainSender(
                self._my_id, make_transport(kind, ucx_tls=tls, link_bytes_per_s=pace)
            )
        return self._sender

    def _on_master_change(self, master: RelayInfo) -> None:
        """§4.3: the trainer is told the new master; it re-sends its newest version there
        (the new master resumes from the chunks it already has)."""
        self.master_changes.append({"master": master.id, "t": time.monotonic()})
        with self._lock:
            if self._last is not None:
                version, blob, chunk_bytes = self._last
                self._stream(master, version, blob, chunk_bytes, time.monotonic())

    def _client(
        self, relay: RelayInfo, channel: str = "request"
    ) -> tuple[threading.Lock, ControlClient]:
        key = (relay.id, channel)
        with self._clients_lock:
            if key not in self._clients:
                self._clients[key] = (threading.Lock(), ControlClient(relay.host, relay.ctrl_port))
            return self._clients[key]

    def _request(self, relay: RelayInfo, obj: dict, timeout_s: float | None = None) -> dict:
        lock, client = self._client(relay)
        with lock:
            return client.request(obj, timeout_s=timeout_s)


def _scratch_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class RelaySource:
    """The rollout's side: the newest version the relay on this machine holds (a
    ``WeightSource``). The relay verified each version (CRC-32 and SHA-256) when it committed it,
    so a reader only checks the file size (``verify`` hashes it once more: tests, tools)."""

    def __init__(self, root: str, *, verify: bool = False):
        self.root = root
        self.verify = verify
        self._checked: dict[str, bool] = {}

    def latest(self) -> tuple[int, str] | None:
        for version, path in reversed(list_versions(Path(self.root))):
            key = str(path)
            if key not in self._checked:
                ok = complete_version_dir(path)
                self._checked[key] = ok and (not self.verify or verify_version_dir(path))
            if self._checked[key]:
                return version, key
        return None
