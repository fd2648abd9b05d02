"""The root of the config tree: one typed tree for simulate, replay and train."""

from __future__ import annotations

from pydantic import Field, model_validator

from laminar.config.base import Section
from laminar.config.baselines import BaselinesConfig, FaultsConfig
from laminar.config.cluster import ClusterConfig, ModelConfig
from laminar.config.fault_checks import first_problem
from laminar.config.policy import RelayConfig, RepackConfig
from laminar.config.runtime import RuntimeConfig
from laminar.config.sim import SimConfig
from laminar.config.trainer import TrainerConfig
from laminar.config.workload import WorkloadConfig


class LaminarConfig(Section):
    """Everything a Laminar run needs; every field has a default, so ``{}`` is a valid config."""

    seed: int = Field(0, ge=0, le=2**32 - 1)
    """Seed for every random draw of the run (0..2^32-1); same config + seed -> same outputs."""

    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """GPUs and their split."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """The policy model."""

    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    """Batch shape and response lengths."""

    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """The trainer's parallel layout and its forward passes."""

    repack: RepackConfig = Field(default_factory=RepackConfig)
    """Dynamic repack (§5)."""

    relay: RelayConfig = Field(default_factory=RelayConfig)
    """Relay tier (§4)."""

    sim: SimConfig = Field(default_factory=SimConfig)
    """Simulator-only settings."""

    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    """Runtime-only settings."""

    baselines: BaselinesConfig = Field(default_factory=BaselinesConfig)
    """Knobs of the simulated baselines (verl, one-step, stream, partial)."""

    faults: FaultsConfig = Field(default_factory=FaultsConfig)
    """Faults injected into a simulated run."""

    @model_validator(mode="after")
    def _faults_can_happen(self) -> LaminarConfig:
        # A fault that cannot happen was skipped at run time, the run exiting 0 (issues 11 and
        # 32); the checks need several sections, hence here.
        problem = first_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self
