"""The root of the config tree: one typed tree for simulate, replay and train."""

from __future__ import annotations

from pydantic import Field, model_validator

from laminar.config.base import Section
from laminar.config.baselines import BaselinesConfig, FaultsConfig
from laminar.config.cluster import ClusterConfig, ModelConfig
from laminar.config.policy import RelayConfig, RepackConfig
from laminar.config.runtime import RuntimeConfig
from laminar.config.sim import SimConfig
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
    def _faults_within_run(self) -> LaminarConfig:
        steps = self.workload.steps
        for name, spec in self.runtime._step_faults():
            if spec.step >= steps:
                raise ValueError(
                    f"runtime.{name} never happens: the run has workload.steps {steps} "
                    f"(steps 0..{steps - 1})"
                )
        return self
