"""A relay worker's machinery: its store, its data listener, its control port, its master role.

One :class:`RelayNode` runs per machine (paper §4.2), on the process's relay event loop. As a
chain member it receives streams, forwards them and commits each version to shared memory. As
master it broadcasts what the trainer on its machine copied into an inbox, newest first: a
version published while an older one is still queued replaces it (rollouts want the newest).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from dataclasses import asdict, dataclass

from laminar.runtime.relay.control import serve_control
from laminar.runtime.relay.probe import answer_probe
from laminar.runtime.relay.store import RelayStore
from laminar.runtime.relay.stream import (
    ACK,
    HEADER,
    RESUME,
    TRAILER,
    ChainSender,
    Layout,
    LocalSource,
    Partial,
    Peer,
    new_result,
    receive_chunks,
)
from laminar.runtime.relay.transport import Link, LinkError, Transport, recv_obj, send_obj

RESULTS_KEPT = 32  # broadcast outcomes the master remembers, for `result` requests


@dataclass(frozen=True)
class RelayInfo:
    """What others need to reach a relay and read its store."""

    id: str
    host: str
    port: int
    ctrl_port: int
    machine: str
    root: str
    transport: str
    pid: int

    @property
    def peer(self) -> Peer:
        return Peer(self.id, self.host, self.port, self.ctrl_port)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> RelayInfo:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


class RelayNode:
    """One relay: call :meth:`start` on the relay loop, then serve until :meth:`stop`."""

    def __init__(
        self,
        relay_id: str,
        store: RelayStore,
        transport: Transport,
        *,
        host: str = "127.0.0.1",
        machine: str = "",
        confirm_timeout_s: float = 0.3,
        chunk_delay_s: float = 0.0,
    ):
        self.id, self.store, self.transport, self.host = relay_id, store, transport, host
        self.machine = machine or relay_id
        self.sender = ChainSender(
            relay_id, transport, confirm_timeout_s=confirm_timeout_s, chunk_delay_s=chunk_delay_s
        )
        self._partials: dict[int, Partial] = {}
        self._results: dict[int, dict] = {}
        self._done: dict[int, asyncio.Event] = {}
        self._next: dict | None = None  # the newest queued master broadcast
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._tidy_lock = threading.Lock()
        self.info: RelayInfo | None = None
        self.stopped = asyncio.Event()

    async def start(self, port: int = 0, ctrl_port: int = 0) -> RelayInfo:
        """Listen (on these ports when given: a relay restarted where it was) and serve."""
        port = await self.transport.listen(self.host, self._serve_link, port)
        self._ctrl = await serve_control(self.host, self._control, ctrl_port)
        ctrl_port = self._ctrl.sockets[0].getsockname()[1]
        self._spawn(self._master_loop())
        self.info = RelayInfo(
            self.id,
            self.host,
            port,
            ctrl_port,
            self.machine,
            str(self.store.root),
            self.transport.name,
            os.getpid(),
        )
        return self.info

    async def stop(self) -> None:
        """Stop serving: cancel every stream, close every link, stop listening."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._ctrl.close()
        await self.sender.close()
        await self.transport.close()
        for part in self._partials.values():
            if part.forward_task is not None:
                part.forward_task.cancel()
        self._partials.clear()
        self.stopped.set()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- chain member ---------------------------------------------------------------------------
    async def _serve_link(self, link: Link) -> None:
        try:
            while True:
                header = await recv_obj(link, HEADER)
                if header.get("probe"):  # `laminar bench relay` measuring α and β
                    await answer_probe(link, header)
                else:
                    await self._on_stream(link, header)
        except (LinkError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await link.close()

    async def _on_stream(self, link: Link, header: dict) -> None:
        version = int(header["version"])
        layout = Layout(int(header["nbytes"]), int(header["chunk_bytes"]))
        if header["chain"][0]["id"] != self.id:
            raise LinkError(f"stream for {header['chain'][0]['id']} reached {self.id}")
        part = await self._partial(version, layout, header.get("files", {}))
        start = layout.k if part is None else await self._take_over(part, link)
        await send_obj(link, {"start": start}, RESUME)
        try:
            rest = [Peer.from_json(p) for p in header["chain"][1:]]
            if part is not None and part.forward_task is None and rest:
                fwd_header = {k: v for k, v in header.items() if k != "chain"}
                part.forward_task = self._spawn(self.sender.forward(part, fwd_header, rest))
            if part is not None:
                await receive_chunks(link, part, start)
            trailer = await recv_obj(link, TRAILER)
            ack = await self._finish(part, trailer)
            await send_obj(link, ack, ACK)
            if part is not None:
                self._tidy_later(layout.nbytes)
        finally:
            if part is not None and part.owner is not None and part.owner[1] is link:
                part.owner = None

    async def _partial(self, version: int, layout: Layout, files: dict) -> Partial | None:
        """The partial for ``version`` (new, or resumed); None when it is not wanted here
        (already committed, or older than what this relay holds)."""
        part = self._partials.get(version)
        if part is not None and part.layout == layout:
            return part
        newest = self.store.latest()
        if newest is not None and newest[0] >= version:
            return None
        if part is not None:  # same version, other chunking: start over
            await self._release(self._partials.pop(version))
        mapped = await asyncio.get_running_loop().run_in_executor(
            None, self.store.new_file, layout.nbytes
        )
        part = Partial(version, layout, mapped.view(), files)
        part.mapped = mapped  # the relay's shared-memory file behind ``part.view``
        self._partials[version] = part
        return part

    async def _take_over(self, part: Partial, link: Link) -> int:
        """A new stream for a version in progress: end the old upstream's, resume at ``done``."""
        if part.owner is not None and part.owner[1] is not link:
            old_task, old_link = part.owner
            await old_link.close()
            old_task.cancel()
            await asyncio.gather(old_task, return_exceptions=True)
        part.owner = (asyncio.current_task(), link)
        return part.done

    async def _finish(self, part: Partial | None, trailer: dict) -> dict:
        """Verify and commit (once), wait for the sub-chain, and build the ACK."""
        if part is None:
            return new_result()
        if not part.trailer_fut.done():
            part.trailer_fut.set_result(trailer)
        if part.committed_at is None and part.failed is None:
            self._commit(part, trailer)
        result = new_result()
        if part.forward_task is not None:
            result = await asyncio.shield(part.forward_task)
        if part.committed_at is not None:
            result["committed"][self.id] = part.committed_at
        if part.failed is not None:
            result["failed"][self.id] = part.failed
        return result

    def _commit(self, part: Partial, trailer: dict) -> None:
        if part.crc != trailer["crc32"] or part.layout.nbytes != trailer["nbytes"]:
            part.failed = f"checksum mismatch in version {part.version}"
            return
        manifest = {k: trailer[k] for k in ("nbytes", "sha256", "crc32")}
        self.store.commit(part.version, part.mapped, part.files, manifest)
        part.committed_at = time.monotonic()
        self._after_commit(part.version, part.layout.nbytes)

    def _after_commit(self, version: int, nbytes: int) -> None:
        """Older partials are moot now."""
        for old in [v for v in self._partials if v < version]:
            self._spawn(self._release(self._partials.pop(old)))

    def _tidy_later(self, nbytes: int) -> None:
        """Once this relay's part of a broadcast is over (ACK sent): free old versions and
        allocate the next file, in a worker thread, so neither competes with the transfer."""
        loop = asyncio.get_running_loop()
        self._spawn(_quietly(loop.run_in_executor(None, self._tidy, nbytes)))

    def _tidy(self, nbytes: int) -> None:
        """Between broadcasts: free versions beyond ``keep``, allocate the next file (one at a
        time: a second caller waits, then finds the file ready)."""
        with self._tidy_lock:
            self.store.gc()
            self.store.prepare_spare(nbytes)

    async def _release(self, part: Partial) -> None:
        """Stop a partial's forwarder and unmap it (delete its file unless it was committed)."""
        if part.forward_task is not None and not part.forward_task.done():
            part.forward_task.cancel()
            await asyncio.gather(part.forward_task, return_exceptions=True)
        part.view.release()
        if part.committed_at is None:
            self.store.discard(part.mapped)
        else:
            _unmap(part.mapped)

    # --- master ---------------------------------------------------------------------------------
    async def _master_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._next is not None:
                req, self._next = self._next, None
                try:
                    result = await self._broadcast(req)
                except Exception as e:  # the trainer learns it from `result`; the relay goes on
                    result = {**new_result(), "error": f"{type(e).__name__}: {e}"}
                self._record(int(req["version"]), result)
                self._tidy_later(int(req["nbytes"]))

    def _record(self, version: int, result: dict) -> None:
        self._results[version] = result
        self._done.setdefault(version, asyncio.Event()).set()
        for old in sorted(self._results)[:-RESULTS_KEPT]:
            self._results.pop(old)
            self._done.pop(old, None)

    async def _broadcast(self, req: dict) -> dict:
        """Broadcast the trainer's inbox file down ``req["chain"]`` (this relay first)."""
        version, nbytes = int(req["version"]), int(req["nbytes"])
        layout = Layout(nbytes, int(req["chunk_bytes"]))
        loop = asyncio.get_running_loop()
        mapped = await loop.run_in_executor(None, self.store.adopt_file, req["path"], nbytes)
        t0 = float(req.get("t0") or time.monotonic())
        view = mapped.view()
        try:
            source = LocalSource(view, layout)
            header = {
                "version": version,
                "nbytes": nbytes,
                "chunk_bytes": layout.chunk_bytes,
                "files": req.get("files", {}),
                "t0": t0,
                "from": self.id,
            }
            rest = [Peer.from_json(p) for p in req["chain"][1:]]
            fwd = self._spawn(self.sender.forward(source, header, rest)) if rest else None
            trailer = await source.trailer()
            manifest = {k: trailer[k] for k in ("nbytes", "sha256", "crc32")}
            self.store.commit(version, mapped, req.get("files", {}), manifest)
            t_commit = time.monotonic()
            self._after_commit(version, nbytes)
            result = await fwd if fwd is not None else new_result()
        finally:
            view.release()
            _unmap(mapped)
        result["committed"][self.id] = t_commit
        return {**result, "t0": t0, "t_end": time.monotonic(), "k": layout.k}

    # --- control --------------------------------------------------------------------------------
    async def _control(self, req: dict) -> dict:
        op = req.get("op")
        loop = asyncio.get_running_loop()
        if op == "ping":
            latest = self.store.latest()
            receiving = {
                str(v): p.done for v, p in self._partials.items() if p.committed_at is None
            }
            return {
                "id": self.id,
                "latest": None if latest is None else latest[0],
                "receiving": receiving,  # version -> chunks in hand
            }
        if op == "info":
            return self.info.to_json()
        if op == "latest":
            latest = self.store.latest()
            return (
                {"version": None, "path": None}
                if latest is None
                else {"version": latest[0], "path": latest[1]}
            )
        if op == "prepare":
            await loop.run_in_executor(None, self._tidy, int(req["nbytes"]))
            return {"ok": True}
        if op == "lend_inbox":
            path = await loop.run_in_executor(None, self.store.lend_inbox, int(req["nbytes"]))
            self._spawn(
                _quietly(loop.run_in_executor(None, self.store.prepare_spare, int(req["nbytes"])))
            )
            return {"path": str(path)}
        if op == "broadcast":
            return self._enqueue(req)
        if op == "result":
            return await self._result(int(req["version"]), float(req.get("timeout_s", 60.0)))
        if op == "stop":
            self._stopper = loop.create_task(self.stop())  # not in _tasks: stop cancels those
            return {"ok": True}
        raise ValueError(f"unknown control op {op!r}")

    def _enqueue(self, req: dict) -> dict:
        if self._next is not None:  # superseded before it started: drop its inbox
            skipped = self._next
            with contextlib.suppress(FileNotFoundError):
                os.unlink(skipped["path"])
            self._record(int(skipped["version"]), {**new_result(), "skipped": True})
        self._next = req
        self._done.setdefault(int(req["version"]), asyncio.Event())
        self._wake.set()
        return {"accepted": True}

    async def _result(self, version: int, timeout_s: float) -> dict:
        event = self._done.setdefault(version, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return {"pending": True}
        return self._results.get(version, {"pending": True})


def _unmap(mapped) -> None:
    with contextlib.suppress(BufferError):  # a slice is still referenced: unmapped with it
        mapped.close()


async def _quietly(fut) -> None:
    with contextlib.suppress(Exception):  # a failed allocation only costs page faults later
        await fut
