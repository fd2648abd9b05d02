"""The repeat task's answer lengths drawn outside the runtime equal the runtime's own prompts."""

from __future__ import annotations

import pytest

from laminar.config.runtime import RepeatTask
from laminar.policy.repeatanswers import answer_len
from laminar.runtime.tasks.repeat import RepeatTaskGen


@pytest.mark.parametrize(("median", "tail", "cap", "seed"), [(6, 10, 127, 0), (9, 20, 255, 3)])
def test_same_answers_as_the_runtime(median, tail, cap, seed):
    gen = RepeatTaskGen(RepeatTask(median_len=median, tail_ratio=tail), seed=seed,
                        max_answer_len=cap)  # fmt: skip
    ours = [answer_len(seed, p, median_len=median, tail_ratio=tail, max_answer_len=cap)
            for p in range(500)]  # fmt: skip
    assert ours == [len(gen.prompt(p).answer) for p in range(500)]
    assert len(set(ours)) > 10 and max(ours) <= cap
