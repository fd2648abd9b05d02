"""The trainer's micro-batch split and the padded tokens it computes (``policy.microbatch``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from laminar.policy.microbatch import micro_batches, padded_lengths


def test_padding_is_to_the_micro_batch_longest():
    lengths = [5, 100, 7, 6, 50, 8, 300]
    # Sorted 5 6 7 8 50 | 100 | 300 within 250 padded tokens: the first pads four short ones to 50.
    assert micro_batches(lengths, 250) == [[0, 3, 2, 5, 4], [1], [6]]
    assert padded_lengths(lengths, 250) == [50, 100, 50, 50, 50, 50, 300]


@given(st.lists(st.integers(1, 500), min_size=1, max_size=60), st.integers(1, 4096))
def test_padded_lengths_cover_every_sequence(lengths, max_tokens):
    padded = padded_lengths(lengths, max_tokens)
    assert len(padded) == len(lengths)
    assert all(p >= n for p, n in zip(padded, lengths, strict=True))
    assert sum(padded) >= sum(lengths)
    assert max(padded) == max(lengths)
    for batch in micro_batches(lengths, max_tokens):
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= max_tokens
