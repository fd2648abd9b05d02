"""The shipped ``calculator`` environment, spoken in the tiny model's char vocabulary
(``benchmarks/bench_runtime.py --task calculator`` on the ``tiny`` model).

The tiny model writes only lowercase letters, digits, ``*=:|>.,+-`` and space
(``laminar/runtime/models/tinymodel.py``): neither the calculator's ``<tool>expr</tool>`` call
nor a ``\\boxed{}`` answer (its warm-up target) can be written — the warm-up would fail on the
first backslash. This environment is ``laminar.runtime.tasks.calculator.Calculator`` (same
problems, same seeded log-normal latency, same safe evaluation and verifier) with:

- a call written ``calc:EXPRESSION`` (the turn's last ``calc:``, up to the end of the turn),
  handed to the shipped ``step`` as ``<tool>EXPRESSION</tool>``;
- a warm-up that teaches the call format: the target of a share ``call_share`` of the warm-up
  prompts (seeded per prompt index) is the call, ``calc:13+4``, the rest the plain answer,
  ``17`` (the verifier reads the last number). The model learns a mixed first turn, so about
  that share of trajectories call the calculator at least once; what it does after the tool's
  answer (answer, or call again up to ``max_turns``) is not taught.

Use: ``runtime.task = {type: python, entry: "calculator_tiny:make", module_dir: benchmarks/,
args: {path: problems.jsonl, latency_median_s: 1.0, latency_sigma: 1.0, call_share: 0.5,
system_prompt: ""}}`` (``bench_runtime.task_overrides`` writes it).
"""

from __future__ import annotations

import random
import re

from laminar.runtime.tasks.calculator import Calculator

CALL = "calc:"
_SUM = re.compile(r"(\d+)\s*plus\s*(\d+)")


class TinyCalculator(Calculator):
    """The calculator with a call the tiny vocabulary can write (module doc)."""

    def __init__(self, args: dict, seed: int):
        super().__init__(args, seed)
        self.call_share = float(args.get("call_share", 0.5))

    def prompt(self, index: int) -> dict:
        sample = super().prompt(index)
        sample["index"] = index  # the warm-up's target is drawn per prompt index, not per row
        return sample

    def target(self, sample: dict) -> str:
        """The call (``calc:a+b``) for a seeded ``call_share`` of the prompts, else the answer."""
        rng = random.Random(f"{self.seed}:target:{sample.get('index', sample['id'])}")
        if rng.random() < self.call_share:
            return CALL + expression(sample["messages"][-1]["content"], sample["answer"])
        return str(sample["answer"])

    async def step(self, sample: dict, messages: list[dict]) -> dict | None:
        text = messages[-1]["content"]
        at = text.rfind(CALL)
        if at < 0:
            return None  # no call: the answer is final
        call = f"<tool>{text[at + len(CALL) :].strip()}</tool>"
        return await super().step(sample, [*messages[:-1], {**messages[-1], "content": call}])


def expression(problem: str, answer: str) -> str:
    """The expression a call for ``problem`` computes (``a+b`` for "What is a plus b?"), else
    the answer itself."""
    found = _SUM.search(problem.lower())
    return f"{found[1]}+{found[2]}" if found else str(answer)


def make(args: dict, seed: int) -> TinyCalculator:
    return TinyCalculator(args, seed)
