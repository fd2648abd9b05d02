"""Cluster and model sections: what hardware, what model, how GPUs are split."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from laminar.config.base import Section
from laminar.specs.hardware import DEFAULT_MACHINE_GPUS, catalog_machine_gpus, check_overrides


class ClusterConfig(Section):
    """The GPUs of the run and how they are split between trainer and rollouts."""

    gpus: int = Field(1024, ge=1, le=65536)
    """Total GPUs in the cluster (count, 1..65536)."""

    gpus_per_machine: int = Field(DEFAULT_MACHINE_GPUS, ge=1, le=64)
    """GPUs per machine (count, 1..64); one relay worker runs per rollout machine. Left out,
    the hardware's machine where the catalog names one (``gb200``: a 4-GPU compute tray),
    else 8."""

    trainer_fraction: float = Field(0.25, gt=0.0, lt=1.0)
    """Fraction of GPUs given to the trainer in decoupled systems (0 < f < 1); the rest roll out.
    Rounded to whole machines. Colocated systems (verl) ignore it."""

    hardware: str = Field("h800", min_length=1, max_length=64)
    """GPU type from the hardware catalog (``a100-80g``, ``h100-sxm``, ``h800``, ``h20``,
    ``h200``, ``b200``, ``b300``, ``gb200`` and ``gb300`` (NVL72 racks), ``mi300x``;
    ``laminar/data/hardware.json``); 1..64 characters."""

    hardware_spec: dict[str, bool | float | str] = Field(default_factory=dict, max_length=64)
    """Facts put over the ``hardware`` entry for this run, name -> value in the fact's unit
    (e.g. ``{gpu_memory_bytes: 96e9, hbm_bytes_per_s: 4.0e12}``; names in
    ``laminar/data/hardware.json``, plus ``arch`` and ``nvlink_spans_machines`` (true: the
    NVLink domain of ``nvlink_domain_gpus`` spans machines, as a GB200 NVL72 rack's does)); at
    most 64 entries, each finite and within 10x of the catalog's range
    (``laminar.specs.hardware.check_overrides``). Empty: the catalog's."""

    @field_validator("hardware_spec")
    @classmethod
    def _plausible_facts(cls, v: dict[str, bool | float | str]) -> dict[str, bool | float | str]:
        check_overrides(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _machine_of_hardware(cls, data: Any) -> Any:
        if isinstance(data, dict) and "gpus_per_machine" not in data:
            gpm = catalog_machine_gpus(data.get("hardware"))
            if gpm:
                return {**data, "gpus_per_machine": gpm}
        return data

    @model_validator(mode="after")
    def _whole_machines(self) -> ClusterConfig:
        if self.gpus % self.gpus_per_machine != 0 and self.gpus > self.gpus_per_machine:
            raise ValueError(
                f"gpus ({self.gpus}) must be a multiple of gpus_per_machine "
                f"({self.gpus_per_machine})"
            )
        return self


MAX_ROLLOUT_TP = 64
"""Largest ``model.rollout_tp`` a config takes (``laminar plan``'s TP axis stops there too)."""


class ModelConfig(Section):
    """The policy model being trained."""

    name: str = Field("qwen2.5-7b", min_length=1, max_length=128)
    """Model from the catalog (``laminar/data/models/``: ``qwen2.5-7b``, ``qwen3-30b-a3b``,
    ``deepseek-v3``, ...), a label for ``hf_config``/``spec``, or a runtime model
    (``tiny-llama``); 1..128 characters."""

    hf_config: str = Field("", max_length=4096)
    """Path of a Hugging Face ``config.json`` to simulate instead of a catalog model, relative
    to the working directory (0..4096 characters); empty: the catalog's ``name``."""

    spec: dict[str, Any] | None = Field(None, max_length=256)
    """Inline ``config.json`` keys (``hidden_size``, ``num_hidden_layers``, ...; at most 256);
    wins over ``hf_config`` and ``name``. None: not used."""

    rollout_tp: int = Field(1, ge=1, le=MAX_ROLLOUT_TP)
    """Tensor-parallel degree of one rollout replica (GPUs, 1..64)."""

    rollout_ep: int = Field(1, ge=1, le=512)
    """Expert-parallel degree of one rollout replica of a MoE model (1..512): a replica spans
    rollout_tp x rollout_ep GPUs, routed experts split over all of them, attention data-parallel
    over the EP groups; tokens reach their experts by all-to-all. 1 for dense models."""

    rollout_quant: Literal["none", "fp8"] = "none"
    """Rollout weight quantization: ``none`` (``dtype``) or ``fp8`` (1 byte a weight, FP8 tensor
    cores where the GPU has them; KV stays in ``dtype``). The trainer stays in ``dtype``."""

    rollout_eager: bool = False
    """The rollout engine runs eagerly, without CUDA graphs (vLLM's ``enforce_eager``): every
    decode step waits for the host to launch each layer's kernels, so a step takes at least
    ``decode_layer_eager_s`` a layer. False: CUDA graphs (vLLM's default). A CPU runtime is
    always eager."""

    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """Weight and KV-cache dtype (one of bfloat16, float16, float32)."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.spec is not None and not self.spec:
            raise ValueError("model.spec is empty; give config.json keys or leave it out")
        return self
