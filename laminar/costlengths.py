"""The cost file's ``policy_lengths`` block, checked: how a calibration's policy answered its task.

``laminar calibrate`` writes it (``laminar.calibrate.answers``): ``runs``, the calibration runs
it came from, ``tasks`` (optional: their repeat tasks, median_len, tail_ratio and
max_response_len, each once), and ``buckets``, ascending and contiguous ranges of the exact
answer length [``answer_min``, ``answer_max``), each with ``samples`` (trajectories),
``cap_frac`` (the share that ran to ``max_response_len``) and ``ratio_q`` (non-decreasing
quantiles of response / exact among the rest). ``laminar.costfile`` calls
:func:`check_policy_lengths`; anything else is a ``ConfigError`` naming the file and the key.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from laminar.errors import ConfigError

MAX_BUCKETS = 64
MAX_QUANTILES = 101
MAX_ANSWER = 1 << 24  # the trace schema's longest response
MAX_RATIO = 1e4


def check_policy_lengths(block: Any, source: str) -> dict:
    """``block`` checked (module docstring): {runs, buckets} with numbers as int / float."""
    if not isinstance(block, dict):
        raise ConfigError(source, "policy_lengths", f"expected a mapping, got {_kind(block)}")
    extra = sorted(set(map(str, block)) - {"runs", "tasks", "buckets"})
    if extra:
        raise ConfigError(source, f"policy_lengths.{extra[0][:40]}", "unknown key; expected "
                          "runs, tasks or buckets")  # fmt: skip
    runs = _number(block.get("runs"), source, "policy_lengths.runs", 1, 10_000, whole=True)
    tasks = _tasks(block["tasks"], source) if "tasks" in block else None
    buckets = block.get("buckets")
    if not isinstance(buckets, list) or not 1 <= len(buckets) <= MAX_BUCKETS:
        raise ConfigError(source, "policy_lengths.buckets",
                          f"expected a list of 1..{MAX_BUCKETS} buckets")  # fmt: skip
    out, prev_max = [], None
    for i, b in enumerate(buckets):
        key = f"policy_lengths.buckets[{i}]"
        if not isinstance(b, dict):
            raise ConfigError(source, key, f"expected a mapping, got {_kind(b)}")
        want = {"answer_min", "answer_max", "samples", "cap_frac", "ratio_q"}
        if set(map(str, b)) != want:
            raise ConfigError(source, key, f"expected exactly the keys {', '.join(sorted(want))}")
        lo = _number(b["answer_min"], source, f"{key}.answer_min", 1, MAX_ANSWER, whole=True)
        hi = _number(b["answer_max"], source, f"{key}.answer_max", 2, MAX_ANSWER, whole=True)
        if hi <= lo:
            raise ConfigError(source, f"{key}.answer_max", f"{hi} must exceed answer_min {lo}")
        if prev_max is not None and lo != prev_max:
            why = f"{lo} must equal the previous bucket's answer_max {prev_max}"
            raise ConfigError(source, f"{key}.answer_min", why)
        prev_max = hi
        samples = _number(b["samples"], source, f"{key}.samples", 1, 1e12, whole=True)
        cap = _number(b["cap_frac"], source, f"{key}.cap_frac", 0.0, 1.0)
        q = b["ratio_q"]
        if not isinstance(q, list) or not 1 <= len(q) <= MAX_QUANTILES:
            raise ConfigError(source, f"{key}.ratio_q",
                              f"expected a list of 1..{MAX_QUANTILES} numbers")  # fmt: skip
        ratios = [_number(x, source, f"{key}.ratio_q[{j}]", 0.0, MAX_RATIO, open_low=True)
                  for j, x in enumerate(q)]  # fmt: skip
        if any(a > b_ for a, b_ in itertools.pairwise(ratios)):
            raise ConfigError(source, f"{key}.ratio_q", "quantiles must not decrease")
        out.append({"answer_min": lo, "answer_max": hi, "samples": samples, "cap_frac": cap,
                    "ratio_q": ratios})  # fmt: skip
    return {"runs": runs, **({"tasks": tasks} if tasks is not None else {}), "buckets": out}


TASK_KEYS = {"median_len": (1.0, 10_000.0, False), "tail_ratio": (1.0, 1000.0, False),
             "max_response_len": (1, MAX_ANSWER, True)}  # fmt: skip
"""A calibration run's repeat task (``laminar.calibrate.answers.task_of``): key -> (low, high,
whole), the bounds ``runtime.task`` and ``workload.max_response_len`` take."""


def _tasks(value: Any, source: str) -> list[dict]:
    """``policy_lengths.tasks``: the tasks of the runs it was measured on (1..64 of them)."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_BUCKETS:
        raise ConfigError(source, "policy_lengths.tasks", f"expected a list of 1..{MAX_BUCKETS} "
                          "tasks")  # fmt: skip
    out = []
    for i, task in enumerate(value):
        key = f"policy_lengths.tasks[{i}]"
        if not isinstance(task, dict) or set(map(str, task)) != set(TASK_KEYS):
            raise ConfigError(source, key, f"expected exactly the keys {', '.join(TASK_KEYS)}")
        out.append({name: _number(task[name], source, f"{key}.{name}", low, high, whole=whole)
                    for name, (low, high, whole) in TASK_KEYS.items()})  # fmt: skip
    return out


def _number(value: Any, source: str, key: str, low: float, high: float, *,
            whole: bool = False, open_low: bool = False) -> Any:  # fmt: skip
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(source, key, f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise ConfigError(source, key, f"{value} is not a finite number")
    if value < low or (open_low and value == low) or value > high:
        lowtxt = f">{low:g}" if open_low else f"{low:g}"
        raise ConfigError(source, key, f"{value:g} is out of range; expected {lowtxt}..{high:g}")
    if whole:
        if value != int(value):
            raise ConfigError(source, key, f"{value:g} must be a whole number")
        return int(value)
    return float(value)


def _kind(value: Any) -> str:
    return type(value).__name__
