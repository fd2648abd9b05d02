"""Workload section: where trajectory lengths come from and the shape of a global batch."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from laminar.config.base import Section


class SyntheticSource(Section):
    """Lengths drawn from a seeded synthetic generator preset (``laminar trace synth``)."""

    type: Literal["synthetic"] = "synthetic"
    """Variant tag: ``synthetic``."""

    preset: str = Field("dapo-math", min_length=1, max_length=64)
    """Generator preset name (``laminar trace synth --list``); 1..64 characters."""

    params: dict[str, float] = Field(default_factory=dict, max_length=64)
    """Overrides of the preset's generator parameters, name -> value in the parameter's own
    unit (e.g. ``{response_median_tokens: 2000}``; names in ``laminar trace synth --list``;
    ``laminar trace fit`` prints them for a trace); at most 64 entries. Each parameter's own
    bounds are checked when the workload is built (``laminar.traces.presets.PARAM_BOUNDS``)."""

    @field_validator("params")
    @classmethod
    def _finite(cls, v: dict[str, float]) -> dict[str, float]:
        for name, value in v.items():
            if not 1 <= len(name) <= 64:
                raise ValueError("parameter names are 1..64 characters")
            if not math.isfinite(value):
                raise ValueError(f"{name}: must be a finite number (got {value})")
        return v


class TraceSource(Section):
    """Lengths replayed from a trace file (CSV, Parquet or JSONL; see ``traces/README.md``)."""

    type: Literal["trace"] = "trace"
    """Variant tag: ``trace``."""

    path: str = Field(..., min_length=1, max_length=4096)
    """Path of the trace file, relative to the working directory (1..4096 characters)."""


class WorkloadConfig(Section):
    """GRPO batch shape and the source of response lengths."""

    source: Annotated[SyntheticSource | TraceSource, Field(discriminator="type")] = Field(
        default_factory=SyntheticSource
    )
    """Where lengths come from: ``{type: synthetic, preset: ...}`` or
    ``{type: trace, path: ...}``."""

    prompts_per_step: int = Field(512, ge=1, le=1_000_000)
    """Prompts per global batch (count, 1..1e6); paper: 512."""

    samples_per_prompt: int = Field(16, ge=1, le=1024)
    """Responses sampled per prompt, the GRPO group size (count, 1..1024); paper: 16."""

    max_prompt_len: int = Field(2048, ge=1, le=1_048_576)
    """Longest prompt (tokens, 1..1M); paper: 2K."""

    max_response_len: int = Field(16384, ge=1, le=1_048_576)
    """Longest response; longer ones are truncated, finish_reason ``length`` (tokens, 1..1M);
    paper: 16K."""

    response_len_mean: float | None = Field(None, ge=1, le=1_048_576)
    """Mean response length over the run's ``steps`` batches, truncated responses included
    (tokens, 1..1M and below ``max_response_len``), as a past run's logs report it; solved into
    the synthetic generator's median (``laminar.traces.lengths``: its log-normal family, every
    preset). None: the preset's own. A trace source overrides it (ignored, with a warning)."""

    response_len_p99: float | None = Field(None, ge=1, le=1_048_576)
    """99th percentile of the response lengths over the run's ``steps`` batches (tokens,
    1..1M, above ``response_len_mean`` and below ``max_response_len``); with the mean it sets
    the generator's median and spread, alone the median at the preset's spread. None: the
    preset's own. A trace source overrides it (ignored, with a warning)."""

    steps: int = Field(20, ge=1, le=1_000_000)
    """Trainer steps (global batches) to run (count, 1..1e6)."""

    @field_validator("response_len_mean")
    @classmethod
    def _mean_below_max(cls, v: float | None, info: ValidationInfo) -> float | None:
        top = info.data.get("max_response_len")
        if v is not None and top is not None and v >= top:
            raise ValueError(
                f"{v:g} tokens is not below max_response_len ({top}): lengths truncated there "
                "have a smaller mean"
            )
        return v

    @field_validator("response_len_p99")
    @classmethod
    def _p99_between(cls, v: float | None, info: ValidationInfo) -> float | None:
        mean, top = info.data.get("response_len_mean"), info.data.get("max_response_len")
        if v is not None and top is not None and v >= top:
            raise ValueError(
                f"{v:g} tokens is not below max_response_len ({top}): a p99 at the max only "
                "says 1% or more are truncated, which pins no distribution"
            )
        if v is not None and mean is not None and v <= mean:
            raise ValueError(
                f"{v:g} tokens is not above response_len_mean ({mean:g}): response lengths are "
                "right-skewed, their p99 lies above their mean"
            )
        return v

    @model_validator(mode="before")
    @classmethod
    def _source_type(cls, data: Any) -> Any:
        # ``--set workload.source.params.x=1`` builds a source without its tag: it means the
        # default (synthetic) source, or a trace when it names a path.
        src = data.get("source") if isinstance(data, dict) else None
        if isinstance(src, dict) and "type" not in src:
            kind = "trace" if "path" in src else "synthetic"
            data = {**data, "source": {"type": kind, **src}}
        return data
