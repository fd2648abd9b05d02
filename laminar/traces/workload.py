"""The trajectories a run consumes: ``cfg.workload`` resolved to a schema frame.

Contract (for the simulator and the runtime): the frame has steps ``0..steps-1``, each with
exactly ``prompts_per_step`` groups of ``samples_per_prompt`` rows, ordered by step, prompt,
sample; ``prompt_id`` is unique over the run (``step * prompts_per_step + p``); columns are the
required ones plus ``turns`` / ``tool_latency_s`` when the source has them (measured columns
are dropped: a run measures its own).

A synthetic source's lengths can be stated as a mean and a p99 (``workload.response_len_mean``,
``workload.response_len_p99``; ``laminar.traces.lengths`` solves them into the generator's
parameters); a trace overrides them.

A trace whose shape differs from the config is reshaped, never rejected (traces/README.md):

* grouped trace: its GRPO groups, ordered by (step, prompt_id), fill the run's groups in order,
  and the run's step boundaries fall every ``prompts_per_step`` groups. A group with more
  samples than ``samples_per_prompt`` keeps its first ones; one with fewer repeats its samples
  cyclically. When the groups run out, they start over from the first (lengths then restart
  their drift).
* ungrouped trace (every group has one sample: serving traces, or schema traces without
  step/prompt_id/sample_index): consecutive rows, in file order, form the groups; rows cycle
  the same way.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from laminar.errors import ConfigError, LaminarError, LaminarWarning, TraceError
from laminar.traces.io import read_trace
from laminar.traces.lengths import resolve_lengths
from laminar.traces.schema import REQUIRED_COLUMNS, SOURCE_COLUMNS, TOOL_COLUMNS
from laminar.traces.synth import preset_params, synthesize

if TYPE_CHECKING:
    from laminar.config import LaminarConfig


def load_workload(cfg: LaminarConfig) -> pd.DataFrame:
    """The trajectories of the run described by ``cfg`` (see the module docstring)."""
    cfg = resolve_lengths(cfg)  # response_len_mean / _p99 -> generator parameters
    w = cfg.workload
    src = w.source
    if src.type == "synthetic":
        try:
            preset_params(src.preset, src.params)
        except LaminarError as e:
            raise ConfigError("config", "workload.source", str(e)) from None
        return synthesize(
            src.preset,
            steps=w.steps,
            prompts_per_step=w.prompts_per_step,
            samples_per_prompt=w.samples_per_prompt,
            max_prompt_len=w.max_prompt_len,
            max_response_len=w.max_response_len,
            seed=cfg.seed,
            overrides=src.params,
        )
    trace = read_trace(src.path, max_response_len=w.max_response_len)
    too_long = (trace["prompt_len"] > w.max_prompt_len).to_numpy()
    if too_long.any():
        row = int(np.flatnonzero(too_long)[0]) + 1
        raise TraceError(
            src.path,
            f"{trace['prompt_len'].iloc[row - 1]} tokens is longer than the declared max "
            f"prompt length {w.max_prompt_len} (raise workload.max_prompt_len)",
            row=row,
            column="prompt_len",
        )
    if len(trace[["step", "prompt_id"]].drop_duplicates()) == 1:
        warnings.warn(
            LaminarWarning(
                f"{src.path}: the trace holds a single GRPO group ({len(trace)} sample(s)); "
                "every group of the run replays its lengths"
            ),
            stacklevel=2,
        )
    if "source_prompt_id" not in trace:  # the run renumbers prompts; outputs keep the trace's
        trace["source_prompt_id"] = trace["prompt_id"].astype("string")
    return reshape(trace, w.steps, w.prompts_per_step, w.samples_per_prompt)


def reshape(trace: pd.DataFrame, steps: int, prompts_per_step: int, n: int) -> pd.DataFrame:
    """``trace`` laid out as ``steps`` x ``prompts_per_step`` groups of ``n`` (module docstring)."""
    total_groups = steps * prompts_per_step
    if not trace.duplicated(["step", "prompt_id"]).any():
        # Ungrouped: consecutive rows make the groups, cycling over the file.
        rows = np.arange(total_groups * n) % len(trace)
        source = trace.reset_index(drop=True)
    else:
        source = trace.sort_values(["step", "prompt_id", "sample_index"], kind="stable")
        source = source.reset_index(drop=True)
        starts, sizes = _groups(source)
        g = np.arange(total_groups) % len(starts)
        j = np.arange(n)
        rows = (starts[g][:, None] + j[None, :] % sizes[g][:, None]).ravel()
    keep = [c for c in (*REQUIRED_COLUMNS, *TOOL_COLUMNS, *SOURCE_COLUMNS) if c in source.columns]
    out = source[keep].iloc[rows].reset_index(drop=True)
    out["step"] = np.repeat(np.arange(steps, dtype="int64"), prompts_per_step * n)
    out["prompt_id"] = np.repeat(np.arange(total_groups, dtype="int64"), n)
    out["sample_index"] = np.tile(np.arange(n, dtype="int64"), total_groups)
    return out


def _groups(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Start row and size of each group of a frame sorted by (step, prompt_id)."""
    key = trace[["step", "prompt_id"]].to_numpy()
    new = np.ones(len(trace), dtype=bool)
    new[1:] = (key[1:] != key[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(trace)))
    return starts, sizes
