"""The one trace schema: a row per trajectory, shared by simulator input, runtime output and replay.

Required columns describe the workload; optional columns are filled by whoever measured them
(the simulator or the runtime) so a real run can be replayed and compared with a simulated one.
See ``traces/README.md`` for the full description.
"""

from __future__ import annotations

# Required: the workload itself.
REQUIRED_COLUMNS: dict[str, str] = {
    "step": "int64",  # RL step (global batch index), 0-based
    "prompt_id": "int64",  # prompt identifier; a GRPO group is (step, prompt_id); text ids
    # (hashes, UUIDs) are numbered in order of first appearance, the text kept in source_prompt_id
    "sample_index": "int64",  # position within its GRPO group, 0..n-1
    "prompt_len": "int64",  # prompt tokens
    "response_len": "int64",  # generated tokens
    "finish_reason": "string",  # "stop" | "length" (truncated at max_response_len)
}

# Optional, multi-turn tool tasks.
TOOL_COLUMNS: dict[str, str] = {
    "turns": "int64",  # assistant turns in the trajectory (>= 1)
    "tool_latency_s": "float64",  # environment (tool) latency per turn, seconds (mean)
}

# Optional: the prompt id as the replayed trace wrote it (text ids kept verbatim).
SOURCE_COLUMNS: dict[str, str] = {"source_prompt_id": "string"}

# Optional, measured by the simulator or the runtime.
MEASURED_COLUMNS: dict[str, str] = {
    "gen_start_s": "float64",  # when generation started, seconds since run start
    "gen_end_s": "float64",  # when the last token was generated
    "replica_id": "string",  # rollout replica that finished it
    "weight_version": "int64",  # generation version (the oldest, if mixed)
    "weight_versions": "string",  # all versions, ';'-joined ("3;4") under partial rollout
    "consumed_version": "int64",  # trainer version that consumed it (-1: not consumed)
    "consumed_s": "float64",  # when the trainer consumed it (NaN: not consumed)
    "staleness": "int64",  # consumed_version - weight_version (-1: not consumed)
}

# Optional, written by the runtime only (the simulator has no rewards).
RUNTIME_COLUMNS: dict[str, str] = {
    "reward": "float64",  # the trajectory's reward (the task's or environment's)
}

FINISH_REASONS = ("stop", "length")

# Every schema column, in the order written files use.
ALL_COLUMNS: dict[str, str] = {
    **REQUIRED_COLUMNS,
    **TOOL_COLUMNS,
    **SOURCE_COLUMNS,
    **MEASURED_COLUMNS,
    **RUNTIME_COLUMNS,
}

# The columns that place a trajectory in its GRPO group. A trace without any of them (a serving
# trace) is "ungrouped": consecutive rows are grouped when it is replayed (traces/README.md).
GROUP_COLUMNS = ("step", "prompt_id", "sample_index")

# Columns whose values may be missing (NaN / empty): measured ones that a run may not reach.
NULLABLE_COLUMNS = frozenset({"gen_start_s", "gen_end_s", "consumed_s", "replica_id", "reward"})

# Lower bounds of numeric columns (values below are errors). Versions and staleness use -1 for
# "not consumed", so their floor is -1.
MIN_VALUES: dict[str, float] = {
    "step": 0,
    "prompt_id": 0,
    "sample_index": 0,
    "prompt_len": 0,
    "response_len": 0,
    "turns": 1,
    "tool_latency_s": 0.0,
    "gen_start_s": 0.0,
    "gen_end_s": 0.0,
    "weight_version": 0,
    "consumed_version": -1,
    "consumed_s": 0.0,
    "staleness": -1,
}

# Upper bounds of numeric columns (values above are errors): physical limits, far above any
# real run, that keep every value exact in int64 and float64 arithmetic. A prompt_id above its
# bound is read as a text id.
MAX_VALUES: dict[str, float] = {
    "step": 1e9,
    "prompt_id": 2**53,
    "sample_index": 1e6,
    "prompt_len": 1 << 24,
    "response_len": 1 << 24,
    "turns": 1e6,
    "tool_latency_s": 1e7,
    "gen_start_s": 1e12,
    "gen_end_s": 1e12,
    "weight_version": 1e9,
    "consumed_version": 1e9,
    "consumed_s": 1e12,
    "staleness": 1e9,
}

# File formats, by extension.
EXTENSIONS = (".csv", ".parquet", ".jsonl")
