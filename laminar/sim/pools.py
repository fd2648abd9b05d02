"""The data module (paper §3.1): prompt pool, partial-response pool and experience buffer.

Trajectories are plain records (``__slots__``): the simulator keeps one per generated response
and writes them out as ``trajectories.parquet``. A GRPO group (one prompt, n samples) is handed
out whole and enters the experience buffer once all its samples are complete, because its
advantages are normalised over the group (§2.1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import simpy

NAN = float("nan")


class Trajectory:
    """One response being generated; lengths in tokens, times in simulated seconds."""

    __slots__ = (
        "admit_step",
        "consumed_s",
        "consumed_version",
        "gen_at_admit",
        "gen_end_s",
        "gen_start_s",
        "generated",
        "group",
        "heap_seq",
        "moves",
        "preemptions",
        "prompt_len",
        "replica",
        "response_len",
        "row",
        "sample_index",
        "sid",
        "stop",
        "tid",
        "turn_state",
        "version",
        "versions",
    )

    def __init__(self, tid: int, group: Group, row: int, sample_index: int, prompt_len: int,
                 response_len: int):  # fmt: skip
        self.tid = tid
        self.sid = str(tid)  # its id in repack plans (``laminar.policy.repack``)
        self.group = group
        self.row = row  # row of the workload table it came from
        self.sample_index = sample_index
        self.prompt_len = prompt_len
        self.response_len = response_len
        self.generated = 0  # response tokens generated so far (kept across preemption/moves)
        self.stop = response_len  # generated tokens at the end of its current turn
        # multi-turn progress (``laminar.sim.turns.TurnState``); None: a single turn
        self.turn_state: Any = None
        self.version = -1  # generation weight version (the oldest, if mixed)
        self.versions: tuple[int, ...] = ()  # every version, when a system mixes them
        self.replica = ""
        self.gen_start_s = NAN
        self.gen_end_s = NAN
        self.consumed_version = -1
        self.consumed_s = NAN
        self.admit_step = 0  # replica step counter when last admitted
        self.gen_at_admit = 0  # generated tokens when last admitted
        self.heap_seq = -1  # its live entry in the replica's completion heap (-1: none)
        self.preemptions = 0
        self.moves = 0


class Group:
    """A GRPO group: one prompt's samples, handed out and consumed together."""

    __slots__ = ("epoch", "gid", "prompt_id", "remaining", "step", "trajs")

    def __init__(self, gid: int, step: int, prompt_id: int, epoch: int):
        self.gid = gid
        self.step = step
        self.prompt_id = prompt_id
        self.epoch = epoch  # how many times the workload wrapped around before this group
        self.trajs: list[Trajectory] = []
        self.remaining = 0


class PromptPool:
    """Prompts in workload order, each a whole GRPO group; wraps around when exhausted.

    Wrapping keeps a run going when generation outpaces the trainer's steps (Laminar keeps
    generating, §6); a wrapped group is a new prompt with the same lengths (``epoch`` + 1).
    """

    def __init__(self, workload: pd.DataFrame, max_prompt_len: int, max_response_len: int):
        df = workload.sort_values(["step", "prompt_id", "sample_index"], kind="stable")
        self.rows = df.index.to_numpy()
        # Python lists with their types declared: the compiled build reads them natively
        self.prompt_len: list[int] = np.minimum(
            df["prompt_len"].to_numpy(np.int64), max_prompt_len
        ).tolist()
        self.response_len: list[int] = np.minimum(
            df["response_len"].to_numpy(np.int64), max_response_len
        ).tolist()
        self.sample_index: list[int] = df["sample_index"].to_numpy(np.int64).tolist()
        keys = df[["step", "prompt_id"]].to_numpy(np.int64)
        starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)])
        self.group_start: list[int] = starts.tolist()
        self.group_end: list[int] = [*starts[1:].tolist(), len(df)]
        self.group_key: list[tuple[int, int]] = [(k[0], k[1]) for k in keys[starts].tolist()]
        if not self.group_start:
            raise ValueError("the workload has no trajectories")
        self.cursor = 0
        self.epoch = 0
        self.groups: list[Group] = []  # every group handed out, in order
        self.trajectories: list[Trajectory] = []  # every trajectory handed out, in order

    def take(self, n_groups: int) -> list[Group]:
        """The next ``n_groups`` prompts, as fresh groups with their trajectories."""
        out = []
        groups, trajectories = self.groups, self.trajectories
        sample_index, prompt_len, response_len = (
            self.sample_index, self.prompt_len, self.response_len
        )  # fmt: skip
        n_starts = len(self.group_start)
        for _ in range(n_groups):
            i = self.cursor
            step, prompt_id = self.group_key[i]
            g = Group(len(groups), step, prompt_id, self.epoch)
            tid = len(trajectories)
            mine = [
                Trajectory(tid + k, g, row, sample_index[row], prompt_len[row], response_len[row])
                for k, row in enumerate(range(self.group_start[i], self.group_end[i]))
            ]
            g.trajs = mine
            trajectories.extend(mine)
            g.remaining = len(mine)
            groups.append(g)
            out.append(g)
            self.cursor += 1
            if self.cursor == n_starts:
                self.cursor = 0
                self.epoch += 1
        return out


class ExperienceBuffer:
    """Completed groups, oldest first; the trainer takes a global batch at a time (FIFO).

    It also applies backpressure to the prompt pool: while it holds ``limit_trajectories``
    completed, unconsumed trajectories (0: no limit), freed rollouts wait before taking new
    prompts. Only complete groups count, so the long tail of a group never throttles anyone.
    """

    def __init__(self, env: simpy.Environment, limit_trajectories: int):
        self.env = env
        self.groups: deque[Group] = deque()
        self.trajectories = 0
        self.limit = limit_trajectories
        self._want = 0
        self._ready: simpy.Event | None = None
        self._room: simpy.Event = env.event()

    def put(self, group: Group) -> None:
        """A group whose samples are all complete."""
        self.groups.append(group)
        self.trajectories += len(group.trajs)
        if self._ready is not None and len(self.groups) >= self._want:
            self._ready.succeed()
            self._ready = None

    def wait_for(self, n_groups: int) -> simpy.Event | None:
        """An event that fires once ``n_groups`` groups are buffered (None: they are already)."""
        if len(self.groups) >= n_groups:
            return None
        self._want = n_groups
        self._ready = self.env.event()
        return self._ready

    def take(self, n_groups: int) -> list[Group]:
        """Remove and return the oldest ``n_groups`` groups."""
        out = [self.groups.popleft() for _ in range(n_groups)]
        self.trajectories -= sum(len(g.trajs) for g in out)
        if self.has_room() and not self._room.triggered:
            self._room.succeed()
            self._room = self.env.event()
        return out

    def has_room(self) -> bool:
        """True while rollouts may take new prompts (see class docstring)."""
        return self.limit == 0 or self.trajectories < self.limit

    def room(self) -> simpy.Event:
        """An event that fires when the trainer next makes room."""
        return self._room


class PartialResponsePool:
    """Trajectories started but not finished, by id (§3.1, §7: kept for recovery and analysis).

    Read on demand from the replicas that hold them (running or waiting), so nothing is
    maintained per trajectory on the simulator's hot path.
    """

    def __init__(self, replicas: Callable[[], list]) -> None:
        self._replicas = replicas

    @property
    def active(self) -> dict[int, Trajectory]:
        return {t.tid: t for r in self._replicas() for t in r.trajectories()}
