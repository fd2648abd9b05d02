"""What every task hands the runtime: a prompt with its reference answer, and the prompt streams."""

from __future__ import annotations

from dataclasses import dataclass

RL_STREAM, WARMUP_STREAM, EVAL_STREAM = 0, 1, 2  # disjoint prompt streams of one seed


@dataclass(frozen=True, slots=True)
class Prompt:
    """One task instance: the prompt text and the exact answer the reward checks against."""

    prompt_id: int
    text: str
    answer: str
