"""How the trainer splits a step's sequences into padded micro-batches; the runtime trains so,
and the simulator and ``laminar calibrate`` count the padded tokens it really computes."""

from __future__ import annotations

from collections.abc import Sequence


def micro_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped by similar length so each padded micro-batch stays within ``max_tokens``.

    A long tail makes one padded batch mostly padding (the longest answer is ~10x the median);
    sorting by length first keeps the padding small. A sequence longer than ``max_tokens`` gets
    a micro-batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and lengths[i] * (len(current) + 1) > max_tokens:
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def padded_lengths(lengths: Sequence[int], max_tokens: int) -> list[int]:
    """Each sequence's length as the trainer computes it: its micro-batch's longest (every row
    of a micro-batch is padded to it). With a few micro-batches per step the padding is large:
    the first one pads many short answers to its longest."""
    out = list(lengths)
    for batch in micro_batches(lengths, max_tokens):
        longest = max(lengths[i] for i in batch)
        for i in batch:
            out[i] = longest
    return out
