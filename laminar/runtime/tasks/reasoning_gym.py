"""``reasoning_gym``: the procedural task generators of the ``reasoning-gym`` package as a task
source, each scored by its own scorer (``runtime.task = {type: reasoning_gym, datasets: {...}}``
or ``{type: python, entry: "laminar.runtime.tasks.reasoning_gym:make", args: {...}}``).

Nothing is downloaded: the generators make their instances from a seed (the run's). Prompt
``index`` draws its generator with the ``datasets`` weights (seeded by the index, so every
process draws the same), then instance ``index % size`` of it. The sample keeps the
generator's name and the instance's index; the instance itself is made again where it is
scored (generation is deterministic), so samples stay small. The answer is what the model
writes in ``<answer>...</answer>`` (the last such tag; reasoning-gym's own convention and
default system prompt); ``reward`` is the generator's ``score_answer`` of it (0..1), 0 without
one. Needs ``pip install 'laminar[envs]'`` (``reasoning-gym``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

KEEP = 1024  # instances each process remembers (a group's samples are scored one after another)


def _import() -> Any:
    try:
        import reasoning_gym
    except ImportError as e:
        raise ImportError(
            f"the reasoning_gym task needs the reasoning-gym package ({e}): "
            "pip install 'laminar[envs]'"
        ) from None
    return reasoning_gym


class ReasoningGym:
    """The environment (module doc)."""

    def __init__(self, args: dict, seed: int):
        rg = _import()
        from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

        self.extract_answer = extract_answer
        datasets = args.get("datasets") or {"basic_arithmetic": 1.0}
        if isinstance(datasets, (list, tuple)):
            datasets = {name: 1.0 for name in datasets}
        known = set(getattr(rg.factory, "DATASETS", ()))
        unknown = sorted(set(datasets) - known) if known else []
        if unknown:
            names = ", ".join(sorted(known)[:12])
            raise ValueError(f"no reasoning-gym generator named {', '.join(map(repr, unknown))} "
                             f"(there are {len(known)}: {names}, ...)")  # fmt: skip
        options = args.get("options") or {}
        self.size = int(args.get("size", 100_000))
        self.seed = seed
        self.names = sorted(datasets)
        weights = np.array([float(datasets[n]) for n in self.names])
        if not (weights > 0).all():
            raise ValueError(f"dataset weights must be > 0: {datasets}")
        self.cum = np.cumsum(weights / weights.sum())
        self.sets = {
            name: rg.create_dataset(name, size=self.size, seed=seed, **options.get(name, {}))
            for name in self.names
        }
        system = args.get("system_prompt")
        self.system = SYSTEM_PROMPTS["default"] if system is None else str(system)
        self._seen: OrderedDict[tuple[str, int], dict] = OrderedDict()
        self._lock = threading.Lock()  # calls come from several threads at once

    def _entry(self, name: str, i: int) -> dict:
        key = (name, i)
        with self._lock:
            entry = self._seen.get(key)
        if entry is None:
            entry = self.sets[name][i]
            with self._lock:
                self._seen[key] = entry
                while len(self._seen) > KEEP:
                    self._seen.popitem(last=False)
        return entry

    def prompt(self, index: int) -> dict:
        u = np.random.default_rng([self.seed, 31, index]).random()
        name = self.names[min(int(np.searchsorted(self.cum, u, side="right")), len(self.names) - 1)]
        i = index % self.size
        entry = self._entry(name, i)
        head = [{"role": "system", "content": self.system}] if self.system else []
        return {"id": f"{name}/{i}", "dataset": name, "index": i,
                "messages": [*head, {"role": "user", "content": entry["question"]}]}  # fmt: skip

    def target(self, sample: dict) -> str:
        """What the warm-up teaches: the generator's answer, in answer tags."""
        return f"<answer>{self._entry(sample['dataset'], sample['index'])['answer']}</answer>"

    def reward(self, sample: dict, messages: list[dict]) -> float:
        answer = self.extract_answer(messages[-1]["content"])
        if answer is None:
            return 0.0
        entry = self._entry(sample["dataset"], sample["index"])
        return float(self.sets[sample["dataset"]].score_answer(answer=answer, entry=entry))


def make(args: dict, seed: int) -> ReasoningGym:
    return ReasoningGym(args, seed)
