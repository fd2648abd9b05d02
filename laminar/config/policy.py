"""Sections for the shared decisions: repack and the relay chain."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from laminar.config.base import Section


class RepackConfig(Section):
    """Dynamic repack of long-tail trajectories (paper §5)."""

    enabled: bool = True
    """Run repack checks at all (true/false); off measures what repack buys."""

    interval_s: float = Field(5.0, gt=0.0, le=3600.0)
    """Seconds between periodic repack checks (0 < s <= 3600); one also runs after each update."""


class RelayConfig(Section):
    """The relay tier that carries weights from the trainer to the rollouts (paper §4)."""

    transport: Literal["ucx", "tcp"] = "ucx"
    """Chain transport: ``ucx`` (ucxx; RDMA where UCX has verbs) or ``tcp`` (plain sockets)."""

    chunks: int = Field(0, ge=0, le=1_000_000)
    """Chunks per broadcast (count, 0..1e6); 0 picks k* with
    ``laminar.policy.relay.optimal_chunks``."""

    heartbeat_s: float = Field(0.2, gt=0.0, le=60.0)
    """Seconds between relay heartbeats (0 < s <= 60); a relay silent for 3 beats is dead."""
