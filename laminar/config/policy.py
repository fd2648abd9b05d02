"""Sections for the shared decisions: repack and the relay chain."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from laminar.config.base import Section

# Chosen from measurements (benchmarks/bench_repack_tail.py; benchmarks/RESULTS.md, "Repack
# without slower tails"): the largest bound that keeps long-tail latency within 10% of repack off.
SLOWDOWN_DEFAULT = 1.15


class RepackConfig(Section):
    """Dynamic repack of long-tail trajectories (paper §5)."""

    enabled: bool = True
    """Run repack checks at all (true/false); off measures what repack buys."""

    interval_s: float = Field(5.0, ge=0.01, le=3600.0)
    """Seconds between periodic repack checks (0.01..3600: checks faster than a decode step
    find nothing new and would flood the simulator with events); one also runs after each
    update."""

    max_step_slowdown: float = Field(SLOWDOWN_DEFAULT, ge=0.0, le=1000.0)
    """§8.4, repack without slower tails: a destination takes a source only while its decode
    step after the merge stays within this multiple of its fastest step (one sequence, empty
    KV cache), by the engine's step-cost model (ratio, 0 or 1..1000; 0: unbounded, only KV
    capacity and B limit a destination). The simulator uses its cost model; the runtime uses
    ``sim.cost_file`` when one is given (e.g. from ``laminar calibrate``), else no step bound,
    and its run directory's ``config.yaml`` then records 0 (the bound it ran with).
    The default is measured: ``benchmarks/bench_repack_tail.py``, benchmarks/RESULTS.md."""

    @field_validator("max_step_slowdown")
    @classmethod
    def _zero_or_at_least_one(cls, v: float) -> float:
        if 0 < v < 1:
            raise ValueError("must be 0 (unbounded) or at least 1 (a step is never faster)")
        return v


class RelayConfig(Section):
    """The relay tier that carries weights from the trainer to the rollouts (paper §4)."""

    enabled: bool = False
    """Carry weights through relay workers, one per machine (true), or through the runtime's
    single-machine /dev/shm store (false, the default on one machine)."""

    transport: Literal["ucx", "tcp"] = "ucx"
    """Chain transport: ``ucx`` (ucxx; RDMA where UCX has verbs) or ``tcp`` (plain sockets)."""

    ucx_tls: str = Field("tcp,self", min_length=1, max_length=256)
    """UCX transports for ``ucx`` (the ``UCX_TLS`` list, 1..256 characters; the environment
    variable wins). ``tcp,self`` keeps relays on one machine on a transport that notices a dead
    peer; on an RDMA cluster use e.g. ``rc,tcp,self``."""

    chunks: int = Field(0, ge=0, le=1_000_000)
    """Chunks per broadcast (count, 0..1e6); 0 picks k* with
    ``laminar.policy.relay.optimal_chunks``."""

    min_chunk_bytes: int = Field(1 << 16, ge=1, le=1 << 30)
    """Smallest chunk k* may shrink to (bytes, 1..1 GiB); bounds per-chunk overhead."""

    alpha_s: float = Field(1e-4, ge=0.0, le=1.0)
    """Link startup cost α of App. D used to pick k* (seconds per message, 0..1);
    ``laminar bench relay`` measures it."""

    link_bytes_per_s: float = Field(1e9, gt=0.0, le=1e13)
    """Link bandwidth 1/β of App. D used to pick k* (bytes/s, 0 < b <= 1e13)."""

    heartbeat_s: float = Field(0.2, gt=0.0, le=60.0)
    """Seconds between relay heartbeats (0 < s <= 60); a relay silent for
    ``dead_after_beats`` beats, or whose port refuses, is dead."""

    dead_after_beats: int = Field(3, ge=1, le=1000)
    """Missed heartbeats after which a silent relay is declared dead (count, 1..1000)."""

    keep_versions: int = Field(3, ge=1, le=100)
    """Weight versions each relay keeps in shared memory (count, 1..100); more than one lets a
    rollout still load the version it was told about after a newer one landed."""
