"""Synthetic workload presets: the generator's parameters, each with its source.

The generator (``laminar.traces.synth``) draws, for GRPO group g at step s and sample i,

    log L = log(response_median_tokens) + drift_per_step * s
            + sigma * (sqrt(group_share) * z_g + sqrt(1 - group_share) * e_gi),

z_g, e_gi ~ N(0, 1): a log-normal body whose log-variance is split between the prompt (hard
prompts give long answers to every sample of the group) and the sample. A further
``runaway_frac`` of samples never stop (repetition loops) and hit the max; the body's own tail
is cut there too. Together they make the truncation spike at ``max_response_len``.
Batch shape and maxima (512 prompts x 16 samples, 2K prompt / 16K response; paper §8, App. A.2)
are not preset parameters: they come from ``workload`` in the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from statistics import NormalDist


def sigma_for_tail_ratio(ratio: float, runaway_frac: float) -> float:
    """Log-sd of the body that puts the p99 of body + runaway mix at ``ratio`` x the median.

    The runaway samples sit at the max, above any p99 below it, so the body supplies only the
    rest of the top 1%: (1 - q) * P(body > ratio * median) + q = 0.01. (The median moves by
    under 0.3% for q < 0.5%, which we neglect.)
    """
    body_tail = (0.01 - runaway_frac) / (1.0 - runaway_frac)
    return math.log(ratio) / NormalDist().inv_cdf(1.0 - body_tail)


@dataclass(frozen=True)
class SynthParams:
    """Parameters of the synthetic generator (units in the names; see module docstring)."""

    response_median_tokens: float
    response_sigma: float
    group_share: float
    runaway_frac: float
    drift_per_step: float
    min_response_tokens: int
    prompt_median_tokens: float
    prompt_sigma: float
    min_prompt_tokens: int
    # Multi-turn tool calling; tool_calls_mean = 0 means a single-turn task (no tool columns).
    tool_calls_mean: float = 0.0
    tool_calls_length_exponent: float = 0.0
    max_turns: int = 1
    tool_latency_median_s: float = 0.0
    tool_latency_sigma: float = 0.0
    tool_latency_max_s: float = 0.0

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


PARAM_BOUNDS: dict[str, tuple[float, float]] = {
    # Physical ranges (inclusive) of each parameter; beyond them the generator's arithmetic
    # breaks down (exp overflow, Poisson rates past int64), and no real workload lives there.
    "response_median_tokens": (1.0, 1_048_576.0),
    "response_sigma": (0.0, 10.0),
    "group_share": (0.0, 1.0),
    "runaway_frac": (0.0, 1.0),
    "drift_per_step": (-1.0, 1.0),
    "min_response_tokens": (0, 1_048_576),
    "prompt_median_tokens": (1.0, 1_048_576.0),
    "prompt_sigma": (0.0, 10.0),
    "min_prompt_tokens": (0, 1_048_576),
    "tool_calls_mean": (0.0, 1000.0),
    "tool_calls_length_exponent": (0.0, 10.0),
    "max_turns": (1, 10_000),
    "tool_latency_median_s": (0.0, 86_400.0),
    "tool_latency_sigma": (0.0, 10.0),
    "tool_latency_max_s": (0.0, 86_400.0),
}
"""Name -> (lowest, highest) allowed value; :func:`laminar.traces.synth.preset_params` checks."""


@dataclass(frozen=True)
class Preset:
    """A named parameter set and what it models."""

    name: str
    description: str
    params: SynthParams = field(repr=False)


def _dapo_math() -> Preset:
    return Preset(
        name="dapo-math",
        description="DAPO-style math reasoning (DAPO-Math-17k, GRPO): long-tailed single-turn "
        "responses, p99 ~ 10x median, truncation spike at the max, lengths growing over steps",
        params=SynthParams(
            # Assumption: early-training responses of Qwen2.5 base models on DAPO-Math-17k are
            # ~1-2K tokens (DAPO, arXiv 2503.14476, mean-length curve). 1300 keeps p99 (below)
            # under the paper's 16K max, so the spike at the max stays < 1% of samples.
            response_median_tokens=1300.0,
            # Paper §1, §2.2: "the 99th-percentile output length ... exceeds the median by an
            # order of magnitude" -> p99 / p50 = 10 with the runaway mass below: sigma = 0.937.
            # (A 20-step 512 x 16 trace measures 9.7-10.4 across seeds.)
            response_sigma=sigma_for_tail_ratio(10.0, runaway_frac=0.003),
            # Assumption: half of the log-variance belongs to the prompt ("hard prompts produce
            # long answers", issue 3); gives a group-max / group-mean ratio near 3 at n = 16.
            group_share=0.5,
            # Assumption: 0.3% of samples loop until the cap (repetition); with the body's own
            # tail past 16K, ~0.6% of responses end with finish_reason "length". Keep in step
            # with response_sigma above.
            runaway_frac=0.003,
            # Assumption: lengths grow as RL proceeds (DAPO reports a steadily rising mean
            # response length); +0.5% median per step, +10% over a 20-step run.
            drift_per_step=0.005,
            # Assumption: the shortest useful answer ("Answer: 42" plus a line of work).
            min_response_tokens=16,
            # Assumption: a DAPO-Math-17k problem plus its instruction template is ~100-300
            # tokens; median 180, log-sd 0.45 (p99 ~ 500, far below the paper's 2K max).
            prompt_median_tokens=180.0,
            prompt_sigma=0.45,
            min_prompt_tokens=32,
        ),
    )


def _tool_calling() -> Preset:
    return Preset(
        name="tool-calling",
        description="multi-turn tool calling (code interpreter on math): response tokens over "
        "all turns, tool calls growing with length, heavy-tailed environment latency per turn",
        params=SynthParams(
            # Assumption: ~1.5K generated tokens over all assistant turns (tool outputs are
            # prompt-side, not response tokens); like dapo-math, it keeps the p99 (~10x) under
            # the paper's 16K max so the truncation spike stays < 1%.
            response_median_tokens=1500.0,
            # Paper §2.2: skewed trajectory lengths; we keep the math task's p99 ~ 10x median.
            response_sigma=sigma_for_tail_ratio(10.0, runaway_frac=0.002),
            group_share=0.5,  # assumption, as for dapo-math
            runaway_frac=0.002,  # assumption: fewer loops, a tool result breaks repetition
            drift_per_step=0.003,  # assumption: slower growth than pure reasoning
            min_response_tokens=32,  # assumption: at least one short call or answer
            # Assumption: problem + tool schema / system prompt of ~400 tokens.
            prompt_median_tokens=400.0,
            prompt_sigma=0.35,
            min_prompt_tokens=64,
            # Assumption: ~2 tool calls at the median length, growing as sqrt(length / median)
            # (longer trajectories make more calls), at most 8 assistant turns (a common
            # max_assistant_turns setting in multi-turn RL recipes).
            tool_calls_mean=2.0,
            tool_calls_length_exponent=0.5,
            max_turns=8,
            # Paper §2.2: "unpredictable environment latency". Assumption: sandboxed code
            # execution takes ~0.8 s median per call, log-sd 1.0 (p99 ~ 8 s), capped by a
            # 30 s sandbox timeout.
            tool_latency_median_s=0.8,
            tool_latency_sigma=1.0,
            tool_latency_max_s=30.0,
        ),
    )


def all_presets() -> dict[str, Preset]:
    """Every synthetic preset, by name."""
    presets = (_dapo_math(), _tool_calling())
    return {p.name: p for p in presets}
