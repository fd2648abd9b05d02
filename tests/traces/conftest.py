"""Small traces shared by the trace tests."""

from __future__ import annotations

import pytest

from laminar.traces import synthesize


def small(preset: str = "dapo-math", **kw):
    args = dict(
        steps=3,
        prompts_per_step=8,
        samples_per_prompt=4,
        max_prompt_len=2048,
        max_response_len=4096,
        seed=7,
    )
    args.update(kw)
    return synthesize(preset, **args)


@pytest.fixture
def math_trace():
    return small()


@pytest.fixture
def tool_trace():
    return small("tool-calling")
