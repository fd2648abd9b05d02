"""The verifiable task of the tiny-model path: write a letter n times.

A prompt ``"17*k="`` asks for ``"kkkkkkkkkkkkkkkkk"`` and an end of sequence. The count n is
log-normal, so answer lengths are long-tailed like reasoning answers (paper §2.2: the p99 is
about 10× the median), and the hard part is stopping at the right length — exactly what RL
sharpens. The reward is a rule, not a model: 1 for the exact answer; for the right letter with a
count off by d, ``0.5 * max(0, 1 - d/n)``; 0 for anything else or an answer cut at the maximum.
"""

from __future__ import annotations

import math

import numpy as np

from laminar.config.runtime import RepeatTask
from laminar.runtime.tasks.base import Prompt

LETTERS = "abcdefghijklmnopqrstuvwxyz"
Z_99 = 2.3263478740408408  # standard normal quantile at 0.99


class RepeatTaskGen:
    """Seeded prompts and the rule-based reward of :class:`RepeatTask`."""

    def __init__(self, cfg: RepeatTask, *, seed: int, max_answer_len: int):
        if max_answer_len < 1:
            raise ValueError("max_answer_len must be >= 1")
        self.cfg = cfg
        self.seed = seed
        self.max_answer_len = max_answer_len
        self.sigma = math.log(cfg.tail_ratio) / Z_99

    def count(self, rng: np.random.Generator) -> int:
        """One answer length: log-normal around the median, clipped to [1, max_answer_len]."""
        n = round(math.exp(math.log(self.cfg.median_len) + self.sigma * rng.standard_normal()))
        return int(min(max(n, 1), self.max_answer_len))

    def prompt(self, prompt_id: int, *, stream: int = 0) -> Prompt:
        """Prompt ``prompt_id`` (the same for the same seed; ``stream`` separates warm-up data)."""
        rng = np.random.default_rng([self.seed, stream, prompt_id])
        n = self.count(rng)
        letter = LETTERS[int(rng.integers(len(LETTERS)))]
        return Prompt(prompt_id, f"{n}*{letter}=", letter * n)

    def target(self, prompt: Prompt) -> str:
        """What the warm-up teaches: the exact answer."""
        return prompt.answer

    def reward(self, prompt: Prompt, response: str, *, finished: bool) -> float:
        """1 for the exact answer, partial credit for the right letter, else 0 (module doc)."""
        if not finished or not response:
            return 0.0
        if response == prompt.answer:
            return 1.0
        letter, n = prompt.answer[0], len(prompt.answer)
        if response != letter * len(response):
            return 0.0
        return 0.5 * max(0.0, 1.0 - abs(len(response) - n) / n)
