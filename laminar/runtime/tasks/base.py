"""What every task hands the runtime: a prompt with its reference answer, and the prompt streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RL_STREAM, WARMUP_STREAM, EVAL_STREAM = 0, 1, 2  # disjoint prompt streams of one seed


@dataclass(frozen=True, slots=True)
class Prompt:
    """One task instance: the prompt text and the exact answer the reward checks against.

    An environment's sample (``runtime.task.type = python``) also carries its chat
    ``messages`` (empty for a text prompt), the ``sample`` dict the environment handed out,
    and ``error``: why no usable sample came (the trajectory then scores 0)."""

    prompt_id: int
    text: str
    answer: str
    messages: tuple[dict, ...] = ()
    sample: dict[str, Any] | None = field(default=None, compare=False)
    error: str = ""
