"""The repeat task: long-tailed lengths, rule-based reward, exact char codec."""

from __future__ import annotations

import numpy as np
import pytest

from laminar.config.runtime import RepeatTask
from laminar.runtime.models.codec import CharCodec, prompt_ids
from laminar.runtime.tasks.repeat import RepeatTaskGen


def test_answer_lengths_are_long_tailed():
    gen = RepeatTaskGen(RepeatTask(median_len=6, tail_ratio=10), seed=1, max_answer_len=10_000)
    lens = np.array([len(gen.prompt(i).answer) for i in range(20_000)])
    p50, p99 = np.percentile(lens, [50, 99])
    assert p50 == pytest.approx(6, abs=1)
    assert 7 <= p99 / p50 <= 13  # p99 ~ 10x median (paper §2.2)


def test_lengths_are_clipped_and_prompts_seeded():
    gen = RepeatTaskGen(RepeatTask(median_len=50, tail_ratio=100), seed=2, max_answer_len=20)
    assert max(len(gen.prompt(i).answer) for i in range(500)) == 20
    assert gen.prompt(7) == RepeatTaskGen(
        RepeatTask(median_len=50, tail_ratio=100), seed=2, max_answer_len=20
    ).prompt(7)
    assert gen.prompt(7) != gen.prompt(7, stream=1)


def test_reward_rules():
    gen = RepeatTaskGen(RepeatTask(), seed=0, max_answer_len=100)
    p = gen.prompt(0)
    n, c = len(p.answer), p.answer[0]
    assert gen.reward(p, p.answer, finished=True) == 1.0
    assert gen.reward(p, p.answer, finished=False) == 0.0  # cut at the max length
    assert gen.reward(p, c * (n + 1), finished=True) == pytest.approx(0.5 * (1 - 1 / n))
    assert gen.reward(p, c * (3 * n), finished=True) == 0.0
    other = "a" if c != "a" else "b"
    assert gen.reward(p, other * n, finished=True) == 0.0
    assert gen.reward(p, "", finished=True) == 0.0


def test_char_codec_round_trip():
    codec = CharCodec()
    text = "17*k=kkk 0:9|>.,+-"
    assert codec.decode(codec.encode(text)) == text
    ids = prompt_ids(codec, "3*a=")
    assert ids[0] == codec.bos_id and codec.decode(ids) == "3*a="
    with pytest.raises(ValueError, match="not in the tiny vocabulary"):
        codec.encode("A")
