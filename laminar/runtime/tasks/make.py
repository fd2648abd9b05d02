"""The task of a run's ``runtime.task``: one constructor for every kind."""

from __future__ import annotations

from typing import Any

from laminar.runtime.tasks.repeat import RepeatTaskGen


def make_task(cfg: Any, *, seed: int, max_answer_len: int) -> Any:
    """The prompt generator and reward of ``runtime.task`` (``repeat``, ``jsonl`` or
    ``python``: an environment of your own, ``laminar.runtime.tasks.python``)."""
    if cfg.type == "jsonl":
        from laminar.runtime.tasks.jsonl import JsonlTaskGen

        return JsonlTaskGen(cfg, seed=seed, max_answer_len=max_answer_len)
    if cfg.type == "python":
        from laminar.runtime.tasks.python import PythonTaskGen

        return PythonTaskGen(cfg, seed=seed, max_answer_len=max_answer_len)
    return RepeatTaskGen(cfg, seed=seed, max_answer_len=max_answer_len)
