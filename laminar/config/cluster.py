"""Cluster and model sections: what hardware, what model, how GPUs are split."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from laminar.config.base import Section


class ClusterConfig(Section):
    """The GPUs of the run and how they are split between trainer and rollouts."""

    gpus: int = Field(1024, ge=1, le=65536)
    """Total GPUs in the cluster (count, 1..65536)."""

    gpus_per_machine: int = Field(8, ge=1, le=64)
    """GPUs per machine (count, 1..64); one relay worker runs per rollout machine."""

    trainer_fraction: float = Field(0.25, gt=0.0, lt=1.0)
    """Fraction of GPUs given to the trainer in decoupled systems (0 < f < 1); the rest roll out.
    Rounded to whole machines. Colocated systems (verl) ignore it."""

    hardware: str = Field("h800", min_length=1, max_length=64)
    """Hardware preset name for the cost model (e.g. ``h800``); 1..64 characters."""

    @model_validator(mode="after")
    def _whole_machines(self) -> ClusterConfig:
        if self.gpus % self.gpus_per_machine != 0 and self.gpus > self.gpus_per_machine:
            raise ValueError(
                f"gpus ({self.gpus}) must be a multiple of gpus_per_machine "
                f"({self.gpus_per_machine})"
            )
        return self


class ModelConfig(Section):
    """The policy model being trained."""

    name: str = Field("qwen2.5-7b", min_length=1, max_length=128)
    """Model preset name for the cost model (``qwen2.5-7b``, ``qwen2.5-32b``, ``qwen2.5-72b``) or
    a runtime model (``tiny-llama``); 1..128 characters."""

    rollout_tp: int = Field(1, ge=1, le=64)
    """Tensor-parallel degree of one rollout replica (GPUs per replica, 1..64)."""

    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """Weight and KV-cache dtype (one of bfloat16, float16, float32)."""
