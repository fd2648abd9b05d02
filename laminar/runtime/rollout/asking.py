"""When a laminar rollout asks the prompt pool again after the pool had nothing for it.

The pool hands out prompts within a budget that opens once per trainer step (``prompts.advance``
right after the step's weights are published). A rollout that asked every poll (10 ms) while
the budget was spent paid a Ray call each time: measured here, ~11% of its engine's core and
~8% of the pool's for one rollout (``docs/fidelity.md``), and at cluster scale hundreds of
rollouts would flood the one pool actor. After an empty answer a rollout therefore waits
before asking again — one poll, then twice as long each time up to ``max_s`` — except that a
newer published weight version (the sign that a step ended and the budget is about to open)
lets it ask at once.
"""

from __future__ import annotations


class AskAgain:
    """The waits of one rollout between empty answers of the prompt pool (module docstring)."""

    def __init__(self, first_s: float, max_s: float):
        if first_s <= 0 or max_s < first_s:
            raise ValueError(f"need 0 < first_s <= max_s (got {first_s}, {max_s})")
        self.first_s, self.max_s = first_s, max_s
        self.wait_s = first_s
        self.next_at_s = float("-inf")
        self.version = -1  # the newest published version seen

    def may_ask(self, now_s: float, latest_version: int) -> bool:
        """Whether to ask now, ``latest_version`` being the newest published weight version."""
        if latest_version > self.version:
            self.version = latest_version
            self.wait_s, self.next_at_s = self.first_s, float("-inf")
        return now_s >= self.next_at_s

    def answered(self, now_s: float, groups: int) -> None:
        """The pool answered with ``groups`` groups."""
        if groups:
            self.wait_s, self.next_at_s = self.first_s, float("-inf")
            return
        self.next_at_s = now_s + self.wait_s
        self.wait_s = min(2.0 * self.wait_s, self.max_s)
