"""The task of a run's ``runtime.task``: one constructor for every kind."""

from __future__ import annotations

from typing import Any

from laminar.runtime.tasks.repeat import RepeatTaskGen

SHIPPED = ("calculator", "reasoning_gym")  # environments shipped with Laminar (this room)


def env_task(cfg: Any) -> Any | None:
    """The environment ``runtime.task`` runs (a ``PythonTask``: its entry, args, timeout, turn
    limit): a ``python`` task's own, a shipped one's (``calculator``, ``reasoning_gym``);
    None for the others (``repeat``, ``jsonl``)."""
    if cfg.type == "python":
        return cfg
    if cfg.type in SHIPPED:
        return cfg.as_env()
    return None


def make_task(cfg: Any, *, seed: int, max_answer_len: int) -> Any:
    """The prompt generator and reward of ``runtime.task`` (``repeat``, ``jsonl``, or an
    environment: ``python``, one of your own, or a shipped one;
    ``laminar.runtime.tasks.python``)."""
    if cfg.type == "jsonl":
        from laminar.runtime.tasks.jsonl import JsonlTaskGen

        return JsonlTaskGen(cfg, seed=seed, max_answer_len=max_answer_len)
    env = env_task(cfg)
    if env is not None:
        from laminar.runtime.tasks.python import PythonTaskGen

        return PythonTaskGen(env, seed=seed, max_answer_len=max_answer_len)
    return RepeatTaskGen(cfg, seed=seed, max_answer_len=max_answer_len)
