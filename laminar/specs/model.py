"""A model's derived facts from its Hugging Face ``config.json`` (or an inline spec).

The cost model and the memory check ask for what a model *does* (parameters read per decode
step, KV bytes per token, FLOPs per token, experts touched by a batch), never for raw config
keys. :class:`ModelSpec` holds those facts (``laminar.specs.modelspec``);
:func:`from_hf_config` reads them from a config.json (``laminar.specs.hfconfig``: the families,
key names, attention kinds, MoE layouts, quantization and multimodal nesting it understands,
and what it refuses). This module adds the shipped catalog (``laminar/data/models/``: dense GQA
Qwen2/2.5, Qwen3 and Llama, Qwen3-MoE and DeepSeek-V3) and the choice a config's ``model``
section makes.

Parameter counts follow the modules the checkpoint holds: embeddings, every layer's attention
projections (with the QKV bias of Qwen2 and the q/k norms of Qwen3), norms, MLPs or routers +
experts, the final norm and an untied output head.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError
from laminar.inputfile import InputFileError, MiB, load_json
from laminar.specs.hfconfig import MAX_DIMS, from_hf_config
from laminar.specs.modelspec import BYTES_PER_DTYPE, ModelSpec

__all__ = [
    "BYTES_PER_DTYPE",
    "MAX_DIMS",
    "ModelSpec",
    "catalog_entry",
    "catalog_names",
    "catalog_spec",
    "describe",
    "from_hf_config",
    "model_label",
    "model_spec",
    "read_hf_config",
]


# The catalog and the config's choice -------------------------------------------------------


def _catalog() -> dict[str, Any]:
    text = (resources.files("laminar") / "data" / "models" / "catalog.json").read_text()
    return json.loads(text)


def catalog_names() -> list[str]:
    """Models shipped in ``laminar/data/models/`` (one plain config.json each)."""
    return sorted(_catalog())


def catalog_entry(name: str) -> dict[str, Any]:
    """The catalog's record of ``name``: Hugging Face id, source, the model card's counts."""
    cat = _catalog()
    if name not in cat:
        raise ConfigError(
            "config",
            "model.name",
            f"unknown model {name!r}; known: "
            f"{', '.join(sorted(cat))} (or give model.hf_config / model.spec)",
        )
    return cat[name]


def catalog_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of a catalog model."""
    entry = catalog_entry(name)
    text = (resources.files("laminar") / "data" / "models" / f"{name}.json").read_text()
    return from_hf_config(json.loads(text), name=name, source=entry["source"])


MAX_HF_CONFIG_BYTES = 4 * MiB
"""Largest ``config.json`` read (bytes); a model's is a few kilobytes."""


def read_hf_config(path: str | Path, *, name: str = "") -> ModelSpec:
    """The :class:`ModelSpec` of a local ``config.json`` file, read with bounds
    (``laminar.inputfile``: a regular file, UTF-8, at most 64 deep; ``Infinity``, which
    transformers writes for a Mamba-2 ``time_step_limit``, is parsed and then refused anywhere
    else by :func:`~laminar.specs.hfconfig.check_finite`)."""
    p = Path(path)
    try:
        data = load_json(p, kind="model.hf_config (config.json)", max_bytes=MAX_HF_CONFIG_BYTES,
                         allow_nan=True)
    except InputFileError as e:
        raise ConfigError(e.path, "", e.detail) from None
    return from_hf_config(data, name=name or p.parent.name or p.stem, source=str(p))


def model_label(model: Any) -> str:
    """The model's name in outputs: ``model.name``, unless that is a catalog name while the
    model comes from ``model.hf_config`` or ``model.spec`` (a preset's default, not this
    model): then the config file's directory (``.../Qwen2.5-7B-Instruct/config.json``) or
    file name, or ``model.spec``."""
    if not (model.spec or model.hf_config) or model.name not in catalog_names():
        return model.name
    if model.spec:
        return "model.spec"
    p = Path(model.hf_config)
    return (p.parent.name if p.name == "config.json" else "") or p.stem or model.name


def model_known(model: Any) -> bool:
    """Whether a config's ``model`` section gives the model's shapes: ``spec``, ``hf_config`` or
    a catalog name (a cost file calibrated on a tiny model names one that has none)."""
    return bool(model.spec or model.hf_config) or model.name in catalog_names()


def model_spec(model: Any) -> ModelSpec:
    """The spec a config's ``model`` section names: ``spec`` (inline), else ``hf_config`` (a
    file), else the catalog entry ``name``."""
    if model.spec:
        return from_hf_config(
            dict(model.spec), name=model_label(model), source="config", where="model.spec."
        )
    if model.hf_config:
        return read_hf_config(model.hf_config, name=model_label(model))
    return catalog_spec(model.name)


def describe(spec: ModelSpec, context: int | None = None) -> str:
    """One line: total/active parameters, layers, attention and KV bytes per token (bf16, at
    ``context`` tokens where windows or state make it depend on the length)."""
    moe = f", {spec.experts} experts (top-{spec.experts_per_token})" if spec.is_moe else ""
    kinds = ""
    if spec.window_layers:
        kinds += f", {spec.window_layers} sliding-window layers ({spec.window:,} tokens)"
    if spec.state_layers:
        beside = " beside attention" if spec.state_beside_attention else ""
        kinds += (f", {spec.state_layers} linear-attention/state-space layers{beside} "
                  f"({spec.state_bytes_per_sequence(2):,} B state/sequence)")  # fmt: skip
    if spec.index_topk:
        kinds += f", sparse attention (DSA: top {spec.index_topk:,} tokens by an indexer)"
    quant = f", {spec.quant_method} checkpoint" if spec.quant_method else ""
    at = f" at {context:,} tokens" if context and (spec.window_layers or spec.state_layers) else ""
    return (
        f"{spec.name}: {spec.total_params / 1e9:.2f}B params ({spec.active_params / 1e9:.2f}B "
        f"active{moe}), {spec.layers} layers{kinds}, attention width {spec.attention_width}"
        f"{quant}, KV {spec.kv_bytes_per_token(2, context):,.0f} B/token (bf16){at}"
    )
