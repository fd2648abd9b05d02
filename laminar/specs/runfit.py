"""Does the runtime's trainer fit its devices? The check ``laminar config fit`` prints and
``laminar train`` refuses to start on, with the same message: one function, one verdict.

The estimate is :func:`laminar.specs.trainmemory.trainer_memory` for the model the runtime
trains (``runtime.model``: the tiny Llama's shape, or the ``config.json`` of a pretrained
directory) at the runtime's settings: ``runtime.trainer_ranks`` shards, micro-batches of
``runtime.grpo.micro_batch_tokens`` padded tokens (at least one longest trajectory),
``activation_checkpointing``, ``logprob_chunk_tokens``, the KL reference when ``kl_coef > 0``,
fp32 master weights, gradients and AdamW states, compute in fp32 on CPU and bf16 on cuda.

Devices: on cuda each rank has ``runtime.gpu_share`` of one GPU of ``cluster.hardware``; on CPU
the ranks share this machine's memory (``MemTotal``; ranks are packed onto one machine), each
with a process's fixed overhead (:data:`CPU_RANK_RESERVE_BYTES`, measured: a process with torch,
transformers and the trainer imported, and its process group). The rollouts' engines are not
counted: this is the trainer's check.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError, LaminarWarning
from laminar.specs.modelspec import ModelSpec
from laminar.specs.trainmemory import TrainerMemory, trainer_memory

# measured (benchmarks/bench_trainer_memory.py): ~0.46 GiB resident with torch, transformers and
# the trainer imported; the gloo group and the allocator's slack on top
CPU_RANK_RESERVE_BYTES = 640 * 2**20
# the tiny Llama's vocabulary: 3 specials and 46 characters (runtime/models/tinymodel.py; a
# test checks the two agree)
TINY_VOCAB = 49
TINY_HEAD_DIM = 64


@dataclass(frozen=True, slots=True)
class RuntimeFit:
    """The runtime trainer's memory check (bytes)."""

    ok: bool
    reason: str
    """Empty when ``ok``; else what does not fit and what to change."""
    key_path: str
    memory: TrainerMemory
    """One rank's estimate."""
    ranks: int
    need_bytes: float
    """What the check compares: per GPU on cuda, the machine's total over its ranks on CPU."""
    capacity_bytes: float
    device: str


def tiny_hf_config(layers: int, hidden: int) -> dict:
    """The tiny Llama's ``config.json`` fields that size it (``tinymodel.llama_config``)."""
    heads = hidden // TINY_HEAD_DIM
    return {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": hidden,
        "intermediate_size": 4 * hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": TINY_HEAD_DIM,
        "vocab_size": TINY_VOCAB, "tie_word_embeddings": False,
    }  # fmt: skip


def runtime_model_spec(cfg: Any) -> ModelSpec:
    """The :class:`ModelSpec` of the model ``laminar train`` trains (``runtime.model``)."""
    from laminar.specs.hfconfig import UnknownArchitecture, as_llama_shaped, from_hf_config

    m = cfg.runtime.model
    if m.type == "tiny":
        return from_hf_config(
            tiny_hf_config(m.layers, m.hidden), name="tiny-llama", source="runtime.model"
        )
    path = Path(m.path).expanduser() / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError("config", "runtime.model.path", f"cannot read {path}: {e}") from None
    try:
        return from_hf_config(data, name=Path(m.path).name, source=str(path))
    except UnknownArchitecture as e:  # transformers trains it; only the memory check is unsure
        warnings.warn(LaminarWarning(f"{e}; the runtime's memory check sizes it as a "
                                     "Llama-style decoder, which may be off"), stacklevel=2)
        return from_hf_config(as_llama_shaped(data), name=Path(m.path).name, source=str(path))


def host_memory_bytes() -> float:
    """This machine's memory (``MemTotal``)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemTotal")


def runtime_trainer_memory(cfg: Any, spec: ModelSpec | None = None) -> TrainerMemory:
    """One rank's memory under ``cfg``'s runtime settings (see the module doc)."""
    from laminar.specs.hardware import hardware_spec

    rt, w = cfg.runtime, cfg.workload
    g = rt.grpo
    cuda = rt.device == "cuda"
    spec = spec or runtime_model_spec(cfg)
    return trainer_memory(
        spec,
        tokens=max(g.micro_batch_tokens, w.max_prompt_len + w.max_response_len),
        ranks=rt.trainer_ranks,
        checkpointing=g.activation_checkpointing,
        logprob_chunk_tokens=g.logprob_chunk_tokens,
        compute_bytes=2 if cuda else 4,
        reference=g.kl_coef > 0,
        reserve_bytes=(
            hardware_spec(cfg.cluster)["activation_reserve_bytes"] if cuda
            else CPU_RANK_RESERVE_BYTES
        ),
    )  # fmt: skip


def check_runtime_fit(cfg: Any, *, capacity_bytes: float | None = None) -> RuntimeFit:
    """Whether the runtime's trainer fits its devices; ``capacity_bytes`` overrides the
    device's memory (per GPU on cuda, the machine's on CPU)."""
    from laminar.specs.hardware import hardware_spec

    rt = cfg.runtime
    spec = runtime_model_spec(cfg)
    mem = runtime_trainer_memory(cfg, spec)
    ranks = rt.trainer_ranks
    if rt.device == "cuda":
        cap = capacity_bytes or hardware_spec(cfg.cluster)["gpu_memory_bytes"] * rt.gpu_share
        need, where = mem.total, f"{rt.gpu_share:g} of a {cfg.cluster.hardware} GPU per rank"
    else:
        cap = capacity_bytes or host_memory_bytes()
        need, where = mem.total * ranks, "this machine's memory, shared by the ranks"
    fits = need <= cap
    reason, key = "", ""
    if not fits:
        reason, key = _reason(cfg, spec, mem, ranks, need, cap, where)
    return RuntimeFit(fits, reason, key, mem, ranks, need, cap, rt.device)


def require_runtime_fit(cfg: Any, **kw: Any) -> RuntimeFit:
    """:func:`check_runtime_fit`, raising :class:`ConfigError` (exit 2) when it fails."""
    fit = check_runtime_fit(cfg, **kw)
    if not fit.ok:
        raise ConfigError("config", fit.key_path, fit.reason)
    return fit


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f} GB"


def _reason(cfg, spec, mem, ranks, need, cap, where) -> tuple[str, str]:
    g = cfg.runtime.grpo
    what = (
        f"the runtime's trainer of {spec.name} ({spec.total_params / 1e9:.3g}B params) needs "
        f"{_gb(mem.total)} per rank on {ranks} rank{'s' if ranks > 1 else ''} (model states "
        f"{_gb(mem.states)}, gathered groups {_gb(mem.gathered)}, activations of a micro-batch "
        f"{_gb(mem.activations)}, log-prob chunk {_gb(mem.logprobs)}, reserve "
        f"{_gb(mem.reserve)}): {_gb(need)} against {_gb(cap)} ({where})"
    )
    per_rank_fixed = mem.unsharded
    if cfg.runtime.device == "cuda" and per_rank_fixed < cap:
        more = math.ceil(mem.states * ranks / (cap - per_rank_fixed))
        if more > ranks:
            hint = f"{what}; raise runtime.trainer_ranks to at least {more}"
            return hint, "runtime.trainer_ranks"
    hints = []
    if not g.activation_checkpointing:
        hints.append("runtime.grpo.activation_checkpointing=true")
    if g.logprob_chunk_tokens == 0:
        hints.append("runtime.grpo.logprob_chunk_tokens=512")
    if mem.activations > mem.states:
        hints.append("a lower runtime.grpo.micro_batch_tokens or workload.max_response_len")
        key = "runtime.grpo.micro_batch_tokens"
    else:
        hints.append("a smaller model or more memory")
        key = "runtime.model"
    return f"{what}; try {', '.join(hints)}", key
