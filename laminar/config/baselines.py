"""Sections for the simulated baselines and for fault injection (owned by
``laminar.sim.baselines`` and ``laminar.sim.faults``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from laminar.config.base import Section


class BaselinesConfig(Section):
    """Knobs of the systems Laminar is compared with (``laminar simulate --systems all``)."""

    partial_eta: int = Field(1, ge=0, le=64)
    """η of the AReaL-like ``partial`` system: a trajectory is trained on at most η versions
    after the oldest version it was generated with (versions, 0..64); AReaL's default is 1."""

    partial_inflight_prompts: int = Field(0, ge=0, le=1_000_000)
    """Prompt groups the ``partial`` system generates at once over all its rollouts (count,
    0..1e6; 0: one global batch, ``workload.prompts_per_step``): AReaL's
    ``max_concurrent_rollouts``, whose default is its consumer batch size, and NeMo RL's
    asynchronous collector, which keeps ``num_prompts_per_step x max_trajectory_age_steps``
    groups in flight. A group starts as soon as one finishes and the staleness bound allows."""

    stream_minibatches: int = Field(4, ge=1, le=1024)
    """Mini-batches per global batch in the ``stream`` system: the trainer starts on each as
    soon as its groups are complete (count, 1..1024). 4 splits the paper's 512 x 16 batch into
    mini-batches of 2048 trajectories, the mini-batch size of its asynchronous runs (App. A.2)."""


class RolloutMachineFault(Section):
    """Kill one rollout machine (its relay and every replica on it) at ``at_s``."""

    type: Literal["rollout_machine"] = "rollout_machine"
    """Variant tag: ``rollout_machine``."""

    at_s: float = Field(..., ge=0.0, le=1.0e9)
    """Simulated second the machine dies (0..1e9)."""

    machine: int = Field(0, ge=0, le=65535)
    """Which rollout machine: index among the rollout machines, 0 = the first (0..65535)."""

    recover_s: float = Field(252.0, ge=0.0, le=1.0e6)
    """Seconds until the machine serves again (0..1e6); paper §8.5: about 252 s."""


class RelayFault(Section):
    """Kill the relay worker of one rollout machine at ``at_s`` (its replicas keep running)."""

    type: Literal["relay"] = "relay"
    """Variant tag: ``relay``."""

    at_s: float = Field(..., ge=0.0, le=1.0e9)
    """Simulated second the relay dies (0..1e9)."""

    machine: int = Field(0, ge=0, le=65535)
    """Whose relay: index among the rollout machines, 0 = the master's (0..65535)."""

    recover_s: float = Field(60.0, ge=0.0, le=1.0e6)
    """Seconds until the relay process is back in the chain (0..1e6); assumption: a CPU
    process restart plus one weight copy, about a minute."""


class TrainerFault(Section):
    """Kill the trainer at ``at_s``; it restarts from its last checkpoint (one per step)."""

    type: Literal["trainer"] = "trainer"
    """Variant tag: ``trainer``."""

    at_s: float = Field(..., ge=0.0, le=1.0e9)
    """Simulated second the trainer dies (0..1e9)."""

    recover_s: float = Field(300.0, ge=0.0, le=1.0e6)
    """Seconds until the trainer trains again (0..1e6); assumption: rescheduling plus loading
    a sharded checkpoint, of the order of the paper's 252 s rollout-machine recovery."""


FaultEvent = Annotated[RolloutMachineFault | RelayFault | TrainerFault, Field(discriminator="type")]


class FaultsConfig(Section):
    """Faults injected into a simulated run (paper §3.3, §4.3, §8.5); none by default."""

    events: list[FaultEvent] = Field(default_factory=list, max_length=1024)
    """Faults to inject, e.g. ``[{type: rollout_machine, at_s: 600, machine: 3}]`` (0..1024
    entries; see the three variants for their fields)."""

    chain_rebuild_s: float = Field(1.0, ge=0.0, le=3600.0)
    """Seconds to rebuild the relay chain around a dead relay (0..3600); paper §4.3: under
    one second."""
