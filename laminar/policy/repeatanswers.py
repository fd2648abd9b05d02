"""The repeat task's answer length for each prompt id, drawn as its prompt generator draws it.

``laminar.runtime.tasks.repeat.RepeatTaskGen.prompt`` seeds one generator per prompt
(``[seed, stream, prompt_id]``) and draws the count n first: log-normal around ``median_len``
with p99 = ``tail_ratio`` x median, rounded, clipped to [1, ``max_answer_len``]. The same draw
here lets ``laminar calibrate`` compare each trained trajectory with the answer it was asked for
and the simulator hand out the very prompts the runtime would (``tests/policy`` checks the two
agree).
"""

from __future__ import annotations

import math

import numpy as np

Z_99 = 2.3263478740408408  # standard normal quantile at 0.99 (tail_ratio is p99 / p50)


def answer_len(seed: int, prompt_id: int, *, median_len: float, tail_ratio: float,
               max_answer_len: int, stream: int = 0) -> int:  # fmt: skip
    """The count n of prompt ``prompt_id`` (module docstring)."""
    rng = np.random.default_rng([seed, stream, prompt_id])
    sigma = math.log(tail_ratio) / Z_99
    n = round(math.exp(math.log(median_len) + sigma * rng.standard_normal()))
    return int(min(max(n, 1), max_answer_len))
