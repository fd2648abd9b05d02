"""Foreign trace layouts, read by column mapping onto the schema.

Serving traces carry prompt and response lengths but no GRPO structure. They become *ungrouped*
schema traces: ``step`` 0, ``prompt_id`` = row, ``sample_index`` 0, and a ``finish_reason``
derived from the declared max response length. ``load_workload`` then groups consecutive rows
into the run's batch shape (traces/README.md, "Replay").
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Layout:
    """A foreign layout: the columns that identify it and how they map onto the schema."""

    name: str
    """Short name used in messages."""
    columns: dict[str, str]
    """Foreign column -> schema column; all of them must be present."""
    reference: str
    """Where the layout comes from."""


LAYOUTS = (
    Layout(
        name="azure",
        columns={"ContextTokens": "prompt_len", "GeneratedTokens": "response_len"},
        reference="Azure LLM inference traces 2023/2024 (TIMESTAMP, ContextTokens, "
        "GeneratedTokens), github.com/Azure/AzurePublicDataset",
    ),
    Layout(
        name="vidur",
        columns={"num_prefill_tokens": "prompt_len", "num_decode_tokens": "response_len"},
        reference="Vidur / Etalon processed traces (num_prefill_tokens, num_decode_tokens, ...), "
        "github.com/microsoft/vidur data/processed_traces",
    ),
)


def detect_layout(columns: list[str]) -> Layout | None:
    """The foreign layout whose columns are all present, or None (a schema-native trace)."""
    present = set(columns)
    if "response_len" in present:
        return None
    for layout in LAYOUTS:
        if set(layout.columns) <= present:
            return layout
    return None


def map_layout(raw: pd.DataFrame, layout: Layout) -> pd.DataFrame:
    """The schema's length columns of a foreign trace; other foreign columns are dropped.

    Grouping columns are left out: the validator fills them for ungrouped traces.
    """
    return raw[list(layout.columns)].rename(columns=layout.columns)
