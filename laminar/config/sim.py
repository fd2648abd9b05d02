"""Simulator section (owned by ``laminar.sim``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from laminar.config.base import Section


class SimConfig(Section):
    """Settings only the simulator reads (``laminar simulate``, ``laminar.sim.simulate``)."""

    systems: list[str] = Field(default_factory=lambda: ["laminar"], min_length=1, max_length=16)
    """Systems to simulate on the same workload and GPUs, one summary row each (1..16 names;
    ``laminar``; see ``laminar.sim.systems``)."""

    decode: Literal["event", "reference"] = "event"
    """Decode model: ``event`` skips to the next event in closed form (O(events)); ``reference``
    advances one decode step per event (O(tokens), for tests)."""

    max_batch: int = Field(256, ge=1, le=65536)
    """B: most trajectories a rollout replica decodes at once (count, 1..65536): vLLM's
    ``max_num_seqs``, whose own default is 256 for its ``LLM`` class and server on GPUs under
    70 GB (and A100), 1024 on larger ones, and 128 for an engine built directly (``AsyncLLM``);
    state what your framework sets. Repack also keeps destinations within it (§5.2)."""

    rollout_batch_prompts: int = Field(0, ge=0, le=1_000_000)
    """Prompts (whole GRPO groups) a rollout takes from the prompt pool each time it frees up
    (count, 0..1e6); 0: the global batch spread over the rollout replicas, rounded up."""

    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    """Fraction of each rollout GPU's memory the engine may use for weights, activations and KV
    (0 < f <= 1); vLLM's default is 0.9."""

    kv_watermark: float = Field(0.01, ge=0.0, lt=1.0)
    """Fraction of KV capacity kept free when admitting a trajectory (0 <= f < 1), as vLLM's
    block-manager watermark; avoids preempting right after an admission."""

    buffer_limit_batches: float = Field(2.0, ge=0.0, le=1000.0)
    """Backpressure: freed rollouts take no new prompts while the experience buffer holds this
    many global batches of completed, not yet trained-on trajectories (batches, 0 or 1..1000;
    0: unbounded; below 1 the trainer could never fill a batch). Not a staleness bound: when the
    trainer is the bottleneck it keeps the rollouts from running arbitrarily far ahead; when
    generation is, it never binds."""

    train_micro_batch_tokens: int = Field(0, ge=0, le=10_000_000)
    """Tokens in one trainer micro-batch, for the memory check's activations (tokens, 0..1e7);
    0: one longest trajectory (max_prompt_len + max_response_len), the least a trainer that
    does not split sequences can use."""

    warmup_steps: Annotated[int, Field(ge=0, le=1_000_000)] | Literal["auto"] = "auto"
    """Trainer steps left out of the summary's rates, as the paper averages after a warm-up
    (§8: ten warm-up iterations) (count, 0..1e6, below workload.steps; ``auto``: the first
    quarter of workload.steps, rounded down). The summary says whether the figures after it are
    steady (``laminar.sim.steady``)."""

    cost_file: str = Field("", max_length=4096)
    """JSON file of cost-model coefficients (as written to ``cost_model.json`` in a run
    directory) to use instead of the hardware/model presets; empty: derive from the presets
    (0..4096 characters)."""

    setting: Literal["auto", "cluster", "runtime"] = "auto"
    """What the config describes: ``cluster`` (GPUs, ``cluster``/``model`` presets),
    ``runtime`` (the job ``laminar train`` runs with this config: ``runtime.rollouts`` replicas
    on their cores, the trainer on its cores, ``runtime.max_batch``, the prompt pool's flow
    control, ``runtime.mode``; see ``laminar/sim/local.py``), or ``auto``: ``runtime`` when
    ``cost_file`` was written by ``laminar calibrate``, else ``cluster``."""

    replica_series: bool = True
    """Record the per-replica time series (KV use, batch size) in ``replicas.parquet``
    (true/false); off saves memory on very long runs."""

    max_sim_time_s: float = Field(1.0e7, gt=0.0, le=1.0e9)
    """Simulated seconds after which a run stops even if the trainer has not finished its steps
    (0 < s <= 1e9); the summary says how many steps were reached."""

    @field_validator("buffer_limit_batches")
    @classmethod
    def _room_for_a_batch(cls, v: float) -> float:
        if 0 < v < 1:
            raise ValueError("must be 0 (unbounded) or at least 1 global batch")
        return v

    @field_validator("systems")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for name in v:
            name = name.strip()
            if not name or len(name) > 32:
                raise ValueError("system names are 1..32 characters")
            if name in out:
                raise ValueError(f"system {name!r} listed twice")
            out.append(name)
        return out
