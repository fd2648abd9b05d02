"""``laminar bench relay``: the chain broadcast measured against its model (App. D) and against
the trainer sending to every relay itself (the global-synchronization pattern).

Relays run as separate processes on this machine (:class:`~.proc.RelayProcesses`), one per
simulated machine: every transfer crosses a process boundary over the chosen transport, as it
would cross machines, without the cost of one Ray node per relay. All of them share this
machine's cores, memory bus and loopback device, which a real cluster does not: see
benchmarks/RESULTS.md for what that hides.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from laminar.errors import LaminarError
from laminar.policy.relay import broadcast_time
from laminar.runtime.relay.control import ControlClient
from laminar.runtime.relay.loop import shared_loop
from laminar.runtime.relay.manager import RelayManager
from laminar.runtime.relay.probe import measure_link
from laminar.runtime.relay.proc import RelayProcesses
from laminar.runtime.relay.publisher import RelayPublisher
from laminar.runtime.relay.store import map_file
from laminar.runtime.relay.stream import ChainSender, Layout, LocalSource
from laminar.runtime.relay.transports import make_transport

MIB = 1 << 20
PROBE_CHUNK_BYTES = MIB  # β is measured with 1 MiB chunks and the relay's window in flight


class RelayBench:
    """One configuration: ``p`` relay processes, ``nbytes`` of weights, one transport."""

    def __init__(
        self,
        p: int,
        nbytes: int,
        transport: str,
        *,
        ucx_tls: str = "tcp,self",
        repeats: int = 3,
        min_chunk_bytes: int = 1 << 16,
        kill: bool = False,
        link_gbps: float = 0.0,
    ):
        if p < 2:
            raise LaminarError("--relays must be at least 2 (a master and one relay)")
        if nbytes < MIB:
            raise LaminarError("--mbytes must be at least 1")
        self.p, self.nbytes, self.transport, self.ucx_tls = p, nbytes, transport, ucx_tls
        self.repeats, self.min_chunk_bytes = repeats, min_chunk_bytes
        if kill and p < 3:
            raise LaminarError("--kill needs at least 3 relays (it kills one in the middle)")
        self.kill = kill
        if link_gbps < 0:
            raise LaminarError("--link-gbps must be >= 0 (0: links as fast as they go)")
        self.link_gbps = link_gbps
        self.pace = link_gbps * 1e9 / 8  # bytes per second; 0: unpaced
        self.naive_cpu_s: list[float] = []
        parent = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
        self.base = parent / f"laminar-bench-relay-{uuid.uuid4().hex[:8]}"
        need = (2 * p + 3) * nbytes  # per relay: one version + one spare; inboxes; slack
        free = shutil.disk_usage(parent).free
        if free < need:
            raise LaminarError(
                f"{parent} has {free / 2**30:.1f} GiB free; "
                f"{p} relays x {nbytes / MIB:.0f} MiB need ~{need / 2**30:.1f} GiB"
            )

    def run(self) -> dict:
        """Measure; return the JSON-ready figures."""
        loop = shared_loop()
        blob = np.random.default_rng(0).integers(0, 256, self.nbytes, dtype=np.uint8).tobytes()
        with RelayProcesses(
            self.p,
            self.base,
            transport=self.transport,
            ucx_tls=self.ucx_tls,
            keep=1,
            link_bytes_per_s=self.pace,
        ) as relays:
            first = relays.infos[1]
            link = loop.run(
                measure_link(
                    self._transport(),
                    first.host,
                    first.port,
                    nbytes=min(self.nbytes, 64 * MIB),
                    chunk_bytes=PROBE_CHUNK_BYTES,
                ),
                300,
            )
            alpha, beta = link["alpha_s"], link["beta_s_per_byte"]
            # silence must last 10 s before a relay is declared dead: other users' jobs load this
            # machine heavily at times; a killed relay refuses its port and is dropped at once
            manager = RelayManager(
                relays.infos, trainer_machine="relay-0", heartbeat_s=0.5, misses=20
            )
            pub = RelayPublisher(
                manager.start(),
                config_json="{}",
                machine="relay-0",
                transport=self.transport,
                ucx_tls=self.ucx_tls,
                alpha_s=alpha,
                link_bytes_per_s=1.0 / beta,
                min_chunk_bytes=self.min_chunk_bytes,
                pace_bytes_per_s=self.pace,
            )
            self.baseline = CopyBaseline(blob, self.base)
            try:
                chain = self._chain(pub, relays, blob)
                naive = self._naive(pub, relays, blob, first_version=self.repeats + 1)
                failure = self._failure(pub, relays, blob) if self.kill else None
            finally:
                pub.close()
                self.baseline.close()
        report = self._report(alpha, beta, link, chain, naive)
        return report if failure is None else {**report, "failure": failure}

    def _chain(self, pub: RelayPublisher, relays: RelayProcesses, blob: bytes) -> dict:
        runs = []
        for version in range(self.repeats + 1):  # version 0 warms up links and files
            self._settle(pub, relays)
            copy_s, copy_shm_s = self.baseline.measure()
            cpu0 = cpu_s(relays)
            pub.publish(version, blob)
            stall_s = pub.stalls_s[-1]
            result = pub.wait(version, timeout_s=600)
            cpu = cpu_s(relays) - cpu0
            if len(result["committed"]) != self.p:
                raise RuntimeError(f"broadcast reached {sorted(result['committed'])} only")
            handoff = result["t0"] + stall_s
            last = max(result["committed"].values())
            runs.append(
                {
                    "stall_s": stall_s,
                    "broadcast_s": last - handoff,
                    "end_to_end_s": last - result["t0"],
                    "k": result["k"],
                    "cpu_s": cpu,
                    "copy_s": copy_s,
                    "copy_shm_s": copy_shm_s,
                }
            )
        return {"runs": runs[1:], "warmup": runs[0]}

    def _naive(
        self, pub: RelayPublisher, relays: RelayProcesses, blob: bytes, first_version: int
    ) -> list[float]:
        """The trainer sends the whole version to each relay in turn, same chunks and window."""
        loop = shared_loop()
        sender = ChainSender("trainer", self._transport())
        layout = Layout(self.nbytes, pub.chunk_bytes(self.nbytes))
        times = []
        try:
            for r in range(self.repeats):
                self._settle(pub, relays)
                header = {
                    "version": first_version + r,
                    "nbytes": self.nbytes,
                    "chunk_bytes": layout.chunk_bytes,
                    "files": {},
                    "t0": time.monotonic(),
                }
                t0, cpu0 = time.perf_counter(), cpu_s(relays)
                loop.run(_send_each(sender, blob, layout, header, relays), 600)
                times.append(time.perf_counter() - t0)
                self.naive_cpu_s.append(cpu_s(relays) - cpu0)
        finally:
            loop.run(sender.close(), 30)
        return times

    def _failure(self, pub: RelayPublisher, relays: RelayProcesses, blob: bytes) -> dict:
        """§4.3 under load: kill the middle relay once the broadcast has passed it (its
        downstream holds chunks); how long until the chain is rebuilt and the broadcast resumed?"""
        victim, after = relays.infos[self.p // 2], relays.infos[self.p // 2 + 1]
        version = 2 * self.repeats + 2
        self._settle(pub, relays)
        pub.publish(version, blob)
        probe = ControlClient(after.host, after.ctrl_port, timeout_s=10)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            reply = probe.request({"op": "ping"})
            if reply["receiving"].get(str(version), 0) > 0 or reply["latest"] == version:
                break
            time.sleep(0.002)
        probe.close()
        t_kill = time.monotonic()
        relays.kill(victim.id)
        result = pub.wait(version, timeout_s=600)
        out = {
            "killed": victim.id,
            "survivors_committed": len(result["committed"]),
            "survivors": self.p - 1,
        }
        if not result["rebuilds"]:
            return {**out, "note": "the broadcast passed the victim before the kill"}
        repair = result["rebuilds"][0]
        return {
            **out,
            "kill_to_resumed_s": repair["t_resumed"] - t_kill,
            "detect_to_resumed_s": repair["rebuild_s"],
            "resumed_at_chunk": repair["resumed_at_chunk"],
            "chunks": result["k"],
        }

    def _transport(self):
        return make_transport(self.transport, ucx_tls=self.ucx_tls, link_bytes_per_s=self.pace)

    def _settle(self, pub: RelayPublisher, relays: RelayProcesses) -> None:
        """Between runs: every relay's next file allocated, the trainer's inbox mapped."""
        for info in relays.infos:
            ControlClient(info.host, info.ctrl_port, timeout_s=120).request(
                {"op": "prepare", "nbytes": self.nbytes}
            )
        pub.ready(timeout_s=60)

    def _report(self, alpha: float, beta: float, link: dict, chain: dict, naive: list) -> dict:
        runs = chain["runs"]
        k = runs[0]["k"]
        measured = statistics.median(r["broadcast_s"] for r in runs)
        model = broadcast_time(self.p, k, self.nbytes, alpha, beta)
        stall = statistics.median(r["stall_s"] for r in runs)
        copy = statistics.median(r["copy_s"] for r in runs)
        copy_shm = statistics.median(r["copy_shm_s"] for r in runs)
        naive_s = statistics.median(naive)
        return {
            "p": self.p,
            "nbytes": self.nbytes,
            "transport": self.transport,
            "relays_as": "processes",
            "link_gbps_emulated": self.link_gbps or None,
            "cpu_cores": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "alpha_s": alpha,
            "beta_s_per_byte": beta,
            "link_gib_per_s": 1.0 / beta / 2**30,
            "chunks": k,
            "measured_s": measured,
            "measured_runs_s": [r["broadcast_s"] for r in runs],
            "model_s": model,
            "measured_over_model": measured / model,
            "actor_stall_s": stall,
            "stall_runs_s": [r["stall_s"] for r in runs],
            "copy_s": copy,
            "stall_over_copy": stall / copy,
            "copy_shm_s": copy_shm,
            "stall_over_shm_copy": stall / copy_shm,
            "end_to_end_s": statistics.median(r["end_to_end_s"] for r in runs),
            "naive_s": naive_s,
            "naive_runs_s": naive,
            "measured_over_naive": measured / naive_s,
            "warmup_broadcast_s": chain["warmup"]["broadcast_s"],
            # CPU seconds the relays and the trainer side spent per broadcast; divided by the
            # cores, the shortest it could take here, even with this machine to itself
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "cpu_floor_s": statistics.median(r["cpu_s"] for r in runs) / (os.cpu_count() or 1),
            "naive_cpu_s": statistics.median(self.naive_cpu_s),
        }


async def _send_each(
    sender: ChainSender, blob: bytes, layout: Layout, header: dict, relays: RelayProcesses
) -> None:
    source = LocalSource(memoryview(blob), layout)  # one checksum pass, reused for every relay
    for info in relays.infos:
        result = await sender.forward(source, header, [info.peer])
        if info.id not in result["committed"]:
            raise RuntimeError(f"naive send to {info.id} failed: {result}")


def cpu_s(relays: RelayProcesses) -> float:
    """CPU seconds used so far by every live relay process and by this one (the trainer side),
    all threads included."""
    return sum(os.times()[:2]) + relay_cpu_s(relays)


def relay_cpu_s(relays: RelayProcesses) -> float:
    """CPU seconds used so far by every live relay process, all threads included."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for proc in relays.procs.values():
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text()
        except OSError:
            continue  # killed
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


class CopyBaseline:
    """One memory copy of the weights, timed just before each publish so that it meets the same
    load: into private memory already faulted in (the floor), and into a shared-memory mapping
    already faulted in (what any hand-off to another process must write into; tmpfs has no huge
    pages here, so this copy is slower)."""

    def __init__(self, blob: bytes, shm_dir: Path):
        self.src = np.frombuffer(blob, np.uint8)
        self.private = np.ones(len(blob), np.uint8)
        shm_dir.mkdir(parents=True, exist_ok=True)
        self.shared = map_file(shm_dir / ".copy-baseline", len(blob), create=True, populate=True)

    def measure(self) -> tuple[float, float]:
        """Seconds for one copy into (private, shared) memory."""
        out = []
        for dst in (self.private, np.frombuffer(self.shared.mm, np.uint8)):
            t0 = time.perf_counter()
            np.copyto(dst, self.src)
            out.append(time.perf_counter() - t0)
        return out[0], out[1]

    def close(self) -> None:
        self.shared.close()
        self.shared.path.unlink(missing_ok=True)
