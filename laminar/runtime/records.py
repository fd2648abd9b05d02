"""The one record that travels between the runtime's actors: a trajectory.

A trajectory is created when its prompt group is handed to a rollout, streams its tokens into
the partial-response pool while it runs, moves between rollouts when repack or recovery says so
(carrying its tokens, so the destination continues where the source stopped), and lands in the
experience buffer when it finishes. It keeps exactly one weight version all along (paper §2.4).

A multi-turn trajectory (an environment with ``step``, ``laminar.runtime.rollout.turns``) holds
its observations' tokens in ``tokens`` too, between its assistant turns: they are context, not
generated. ``obs_spans`` says where they are (the trainer masks them out of the loss; their
``logprobs`` are NaN), ``obs_messages`` what the environment answered (handed back to it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class PromptGroup:
    """A prompt handed out by the prompt pool: ``n`` samples will be generated for it (GRPO)."""

    prompt_id: int
    prompt_ids: tuple[int, ...]
    n: int

    def trajectories(self, version: int, max_tokens: int, now_s: float) -> list[Traj]:
        """The group's ``n`` fresh trajectories, generated with weight ``version``."""
        return [
            Traj(
                traj_id=traj_id(self.prompt_id, i),
                prompt_id=self.prompt_id,
                sample_index=i,
                prompt_ids=self.prompt_ids,
                version=version,
                max_tokens=max_tokens,
                gen_start_s=now_s,
            )
            for i in range(self.n)
        ]


def traj_id(prompt_id: int, sample_index: int) -> str:
    """The id of sample ``sample_index`` of prompt ``prompt_id``."""
    return f"p{prompt_id}-s{sample_index}"


@dataclass(slots=True)
class Traj:
    """One trajectory: prompt, the tokens generated so far, and where and when they came from."""

    traj_id: str
    prompt_id: int
    sample_index: int
    prompt_ids: tuple[int, ...]
    version: int
    """The one weight version every token was generated with."""
    max_tokens: int
    """Response budget in tokens (whole trajectory, not what is left)."""
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    """Log-probability of each generated token under the generating policy (behaviour policy)."""
    gen_start_s: float = math.nan
    gen_end_s: float = math.nan
    replica_id: str = ""
    """The replica that holds it now (or finished it)."""
    migrations: int = 0
    """Times it was moved to another replica mid-generation (repack or recovery)."""
    finish_reason: str | None = None
    reward: float = math.nan
    env_error: str = ""
    """Why the reward is 0 without a verdict: the environment (or verifier) raised, timed out
    or answered nonsense (``laminar.runtime.envs.calls``); empty when it answered."""
    source_id: str = ""
    """An environment's own id of the sample (``runtime.task.type: python``); empty else."""
    turns: int = 0
    """Assistant turns begun (a multi-turn task's trajectory: 1 from its start; 0: a
    single-turn task's, which has no turns to count)."""
    obs_spans: list[tuple[int, int]] = field(default_factory=list)
    """``[start, end)`` offsets in ``tokens`` of each observation (environment message)."""
    obs_messages: list[dict] = field(default_factory=list)
    """The environment's message of each span of ``obs_spans``, as it answered it."""
    tool_s: float = 0.0
    """Seconds its environment took over the ``step`` calls whose message it appended."""

    @property
    def obs_tokens(self) -> int:
        """Observation tokens among ``tokens`` (context the model did not generate)."""
        return sum(end - start for start, end in self.obs_spans)

    @property
    def generated_tokens(self) -> int:
        """Tokens the model generated (every assistant turn's), what the budget bounds."""
        return len(self.tokens) - self.obs_tokens

    @property
    def remaining_tokens(self) -> int:
        """Response tokens it may still generate."""
        return self.max_tokens - self.generated_tokens

    @property
    def tool_latency_s(self) -> float:
        """Mean seconds of its environment's calls that led to another turn (0 with none):
        the trace's ``tool_latency_s``."""
        calls = len(self.obs_spans)
        return self.tool_s / calls if calls else 0.0

    def restarted(self, version: int) -> Traj:
        """A copy back at its prompt, to be generated anew with weight ``version`` (its
        version is gone: a trajectory never mixes versions)."""
        return replace(self, version=version, tokens=[], logprobs=[], turns=min(self.turns, 1),
                       obs_spans=[], obs_messages=[], tool_s=0.0)  # fmt: skip

    def copy(self) -> Traj:
        """A copy that shares no list with this one (what travels to a pool)."""
        return replace(self, tokens=list(self.tokens), logprobs=list(self.logprobs),
                       obs_spans=list(self.obs_spans),
                       obs_messages=[dict(m) for m in self.obs_messages])  # fmt: skip

    @property
    def kv_tokens(self) -> int:
        """KV-cache tokens it occupies (prompt + generated), what repack packs (§5.2)."""
        return len(self.prompt_ids) + len(self.tokens)
