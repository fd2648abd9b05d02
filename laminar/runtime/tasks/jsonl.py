"""Prompts from a JSONL file, scored by the math verifier (``runtime.task = {type: jsonl}``).

Each line is one JSON object with a string ``prompt`` and an ``answer`` (string or number).
RL prompts walk the file in a seeded order, a fresh permutation per pass; warm-up and held-out
evaluation draw from their own seeded orders of the same rows (a JSONL task has no separate
held-out split unless you give it one as another file). The reward is 1 when the verifier
finds the reference answer, else 0 — or, with ``reward: "module:function"``, what that
function answers for ``({id, prompt, answer}, messages)``, called like an environment's
``reward`` (``laminar.runtime.envs``: off the event loop, within ``reward_timeout_s``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from laminar.config.runtime import JsonlTask
from laminar.errors import LaminarError
from laminar.runtime.tasks.base import Prompt
from laminar.runtime.tasks.verifier import is_correct


class TaskFileError(LaminarError):
    """A task file is missing or malformed; the message names the file and line."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None):
        where = f"{path}, line {line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def load_rows(path: str | Path) -> list[tuple[str, str]]:
    """(prompt, answer) of every line; a bad file is a :class:`TaskFileError`."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFileError(p, f"cannot read the task file ({e})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TaskFileError(p, f"not valid JSON ({e.msg})", line=n) from None
        if not isinstance(obj, dict):
            raise TaskFileError(p, "expected an object with 'prompt' and 'answer'", line=n)
        prompt, answer = obj.get("prompt"), obj.get("answer")
        if not isinstance(prompt, str) or not prompt.strip():
            raise TaskFileError(p, "'prompt' must be a non-empty string", line=n)
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise TaskFileError(p, "'answer' must be a string or a number", line=n)
        rows.append((prompt, str(answer)))
    if not rows:
        raise TaskFileError(p, "the task file holds no prompts")
    return rows


class JsonlTaskGen:
    """Seeded prompts from the file and the verifier's reward."""

    def __init__(self, cfg: JsonlTask, *, seed: int, max_answer_len: int):
        self.cfg = cfg
        self.seed = seed
        self.rows = load_rows(cfg.path)
        self._orders: dict[tuple[int, int], np.ndarray] = {}
        if cfg.reward:  # a function of the user's instead of the verifier
            from types import SimpleNamespace

            from laminar.runtime.envs.calls import EnvCaller
            from laminar.runtime.envs.load import load_factory

            fn = load_factory(cfg, "reward")
            self.caller = EnvCaller(SimpleNamespace(reward=fn), cfg.reward_timeout_s)
            self.ascore = self._ascore  # the rollout awaits it (off its event loop)

    def _row(self, prompt_id: int, stream: int) -> int:
        n = len(self.rows)
        epoch = prompt_id // n
        key = (stream, epoch)
        if key not in self._orders:
            self._orders = {key: np.random.default_rng([self.seed, stream, epoch]).permutation(n)}
        return int(self._orders[key][prompt_id % n])

    def prompt(self, prompt_id: int, *, stream: int = 0) -> Prompt:
        text, answer = self.rows[self._row(prompt_id, stream)]
        return Prompt(prompt_id, text, answer)

    def target(self, prompt: Prompt) -> str:
        """What the warm-up teaches: the answer, boxed."""
        return f"\\boxed{{{prompt.answer}}}"

    def _sample(self, prompt: Prompt) -> dict:
        return {"id": prompt.prompt_id, "prompt": prompt.text, "answer": prompt.answer}

    async def _ascore(self, prompt: Prompt, response: str, *, finished: bool) -> tuple:
        """(reward of ``runtime.task.reward``, why it is 0 when it failed: else empty)."""
        messages = [{"role": "user", "content": prompt.text},
                    {"role": "assistant", "content": response}]  # fmt: skip
        reward, error = await self.caller.call("reward", self._sample(prompt), messages)
        return (0.0, error) if error else (reward, "")

    def reward(self, prompt: Prompt, response: str, *, finished: bool) -> float:
        if self.cfg.reward:
            messages = [{"role": "user", "content": prompt.text},
                        {"role": "assistant", "content": response}]  # fmt: skip
            reward, error = self.caller.call_sync("reward", self._sample(prompt), messages)
            return 0.0 if error else reward
        if not finished or not response:
            return 0.0
        return 1.0 if is_correct(response, prompt.answer) else 0.0
