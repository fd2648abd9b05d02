"""The rollout manager (paper §3.1, §5.1, §3.3): watches the rollouts, repacks, recovers.

Every ``interval_s`` it takes a snapshot of each rollout, turns them into
:class:`laminar.policy.repack.ReplicaState` and asks :func:`laminar.policy.repack.plan_repack`
— the same function the simulator calls — for moves, which it carries out: pin the destination
at the trajectories' version, abort them on the source (their partial tokens come back), and
resubmit prompt + partial tokens on the destination. A rollout that stops answering is dead: its
in-progress trajectories, read back from the partial-response pool, continue on a healthy
rollout of the same version, or restart there from the prompt when none has that version (a
trajectory never mixes versions). Recovery asks the experience buffer first: a trajectory the
dead replica already delivered is finished, not re-run (exactly once). A snapshot that does not
come back within ``health_timeout_s`` counts as a death too (a hung actor); a replica whose
engine died or stalled raises from its snapshot (``laminar.runtime.faults.watchdog``).

§8.4, repack without slower tails: when the job has a cost file (``sim.cost_file``, e.g. from
``laminar calibrate``), its decode-step coefficients go into every snapshot with
``repack.max_step_slowdown``, as the simulator's do, and the policy keeps each destination's step
within the bound; without one the runtime has no step model and only KV capacity and B bound a
destination.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import replace
from typing import Any

from laminar.costfile import read_cost_file
from laminar.errors import ConfigError
from laminar.policy import repack
from laminar.policy.repack import Move, ReplicaState, StepCost, TrajectoryState

_STEP_TERMS = ("decode_base_s", "decode_per_seq_s", "decode_per_kv_token_s")


def step_cost_from_file(path: str) -> StepCost | None:
    """The decode-step coefficients of a cost file (the simulator's format, as written by
    ``laminar calibrate``), read and checked as every command reads one
    (``laminar.costfile``); None for no file."""
    if not path:
        return None
    table = read_cost_file(path).coefficients
    try:
        return StepCost(*(table[name][0] for name in _STEP_TERMS))
    except ValueError as e:
        raise ConfigError(path, "coefficients", str(e)) from None


def as_ran(cfg: Any) -> Any:
    """``cfg`` as the runtime runs it: with no cost file the manager has no step model, so
    repack's step bound is off (``repack.max_step_slowdown`` 0); the run directory records
    this, so simulating a run (``laminar simulate RUN/config.yaml --cost ...``) predicts the
    job that ran, not one with a bound it never had."""
    if cfg.sim.cost_file or cfg.repack.max_step_slowdown == 0:
        return cfg
    repack_cfg = cfg.repack.model_copy(update={"max_step_slowdown": 0.0})
    return cfg.model_copy(update={"repack": repack_cfg})


def replica_state(
    snap: dict,
    kv_prev_tokens: int | None,
    step_cost: StepCost | None = None,
    max_step_slowdown: float = math.inf,
) -> ReplicaState:
    """A rollout snapshot as the policy sees it; KV use counts the tokens of its trajectories.
    ``step_cost`` and ``max_step_slowdown`` bound what it may receive (§8.4)."""
    kv_used = sum(kv for _, kv in snap["trajectories"])
    return ReplicaState(
        replica_id=snap["replica_id"],
        weight_version=snap["version"],
        kv_capacity_tokens=snap["kv_capacity_tokens"],
        kv_used_tokens=kv_used,
        kv_used_prev_tokens=kv_used if kv_prev_tokens is None else kv_prev_tokens,
        max_batch=snap["max_batch"],
        trajectories=tuple(TrajectoryState(tid, kv) for tid, kv in snap["trajectories"]),
        step_cost=step_cost,
        max_step_slowdown=max_step_slowdown,
    )


class RolloutManager:
    """Periodic repack checks and failure recovery over a set of rollout handles."""

    def __init__(
        self,
        rollouts: dict[str, Any],
        partial_pool: Any,
        *,
        interval_s: float,
        repack_enabled: bool,
        t0_s: float,
        buffer: Any = None,
        prompts: Any = None,
        health_timeout_s: float = 60.0,
        step_cost: StepCost | None = None,
        max_step_slowdown: float = 0.0,
    ):
        self.rollouts = dict(rollouts)
        self.partial_pool = partial_pool
        self.buffer = buffer
        self.prompts = prompts
        self.health_timeout_s = health_timeout_s
        self.orphans: list[Any] = []  # trajectories waiting for a rollout to continue them
        self.restarted: list[str] = []  # ids restarted from the prompt (their version was gone)
        self.interval_s = interval_s
        self.repack_enabled = repack_enabled
        self.step_cost = step_cost
        self.max_step_slowdown = max_step_slowdown or math.inf  # config 0: unbounded
        self.t0_s = t0_s
        self.kv_prev: dict[str, int] = {}
        self.events: list[dict] = []  # repack moves and recoveries, for the run directory
        self.kv_series: list[dict] = []  # per-replica KV use at each check
        self.dead: set[str] = set()
        self.stopping = False

    async def run(self) -> None:
        """Check every ``interval_s`` until :meth:`stop`."""
        while not self.stopping:
            await self.check()
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        self.stopping = True

    async def check(self) -> list[Move]:
        """One health check and (when enabled) one repack round; return the moves carried out."""
        ids = list(self.rollouts)
        snaps = await asyncio.gather(
            *[self._snapshot(self.rollouts[i]) for i in ids], return_exceptions=True
        )
        live = []
        for rid, snap in zip(ids, snaps, strict=True):
            if isinstance(snap, BaseException):
                await self.recover(rid, reason=f"{type(snap).__name__}: {snap}"[:300])
            else:
                live.append(snap)
        if self.orphans:
            await self._place_orphans()
        self._record(live)
        if not self.repack_enabled:
            return []
        states = [
            replica_state(
                s, self.kv_prev.get(s["replica_id"]), self.step_cost, self.max_step_slowdown
            )
            for s in live
        ]
        self.kv_prev = {st.replica_id: st.kv_used_tokens for st in states}
        moves = repack.plan_repack(states)  # §5.2, the one decision shared with the simulator
        versions = {st.replica_id: st.weight_version for st in states}
        done = []
        for move in moves:
            if await self.execute(move, versions[move.src]):
                done.append(move)
        return done

    async def _snapshot(self, handle: Any) -> dict:
        return await asyncio.wait_for(_aw(handle.snapshot.remote()), self.health_timeout_s)

    async def add(self, replica_id: str, handle: Any) -> None:
        """A new (replacement) rollout joins: it gets orphans and repack moves from now on."""
        self.rollouts[replica_id] = handle
        self.dead.discard(replica_id)

    async def adopt_orphans(self, trajs: list[Any]) -> int:
        """In-progress trajectories of a previous run (resume): continue or restart them."""
        self.orphans.extend(trajs)
        await self._place_orphans()
        return len(trajs)

    async def execute(self, move: Move, version: int) -> bool:
        """Carry out one move; False when the destination no longer runs ``version``.

        Either end may die meanwhile; the next health check finds it. A dead source released
        nothing (its trajectories are still its own in the partial pool); what a dead
        destination did not take is registered under it, so its recovery places that too.
        """
        t = time.perf_counter()
        src, dst = self.rollouts[move.src], self.rollouts[move.dst]
        if not await _try(dst.pin.remote(version)):
            return False
        trajs = await _try(src.release.remote(list(move.traj_ids))) or []
        if not await _done(dst.adopt.remote(trajs)):  # also unpins
            moved = [replace(x, replica_id=move.dst, migrations=x.migrations + 1) for x in trajs]
            await self.partial_pool.update.remote(moved, [], [])
        self.events.append(
            {
                "kind": "repack",
                "at_s": time.time() - self.t0_s,
                "src": move.src,
                "dst": move.dst,
                "version": version,
                "planned": len(move.traj_ids),
                "moved": len(trajs),
                "moved_tokens": sum(len(x.tokens) for x in trajs),
                # what the destination prefills again (prompt, turns, observations): the cost
                # of the move (the simulator charges a move as this re-prefill)
                "reprefill_tokens": sum(x.kv_tokens for x in trajs),
                "duration_s": time.perf_counter() - t,
            }
        )
        return True

    async def recover(self, replica_id: str, reason: str = "") -> int:
        """Move a dead rollout's in-progress trajectories to healthy ones (§3.3).

        What the buffer already holds finished before the death (the replica died between
        delivering it and clearing it from the partial pool): it is cleared, not re-run.
        Samples handed to it that it never registered (it died between the prompt pool's
        answer and its registration) restart from their prompt (:meth:`_unregistered`).
        """
        detected_s = time.time() - self.t0_s
        t = time.perf_counter()
        self.rollouts.pop(replica_id, None)
        self.dead.add(replica_id)
        unregistered = await self._unregistered(replica_id)
        lost = await self.partial_pool.on_replica.remote(replica_id)
        done: set[str] = set()
        if self.buffer is not None and lost:
            done = set(await self.buffer.finished_ids.remote([x.traj_id for x in lost]))
            await self.partial_pool.update.remote([], [], sorted(done))
        todo = [x for x in lost if x.traj_id not in done]
        continued, restarted, waiting = await self._place_all(todo)
        self.events.append(
            {
                "kind": "recovery",
                "at_s": detected_s,
                "src": replica_id,
                "reason": reason,
                "continued": continued,
                "restarted": restarted,
                "already_finished": len(done),
                "unregistered": len(unregistered),
                "waiting": waiting,
                "duration_s": time.perf_counter() - t,
            }
        )
        return len(todo)

    async def _unregistered(self, replica_id: str) -> list[Any]:
        """The dead rollout's newest prompt hand-out, those samples the partial pool never
        saw: registered there now, under the dead rollout (so recovery finds them with the
        rest, and they count as in progress from here on), restarted from the prompt."""
        if self.prompts is None:
            return []
        handed = await self.prompts.reclaim.remote(replica_id, time.time() - self.t0_s)
        if not handed:
            return []
        unknown = set(await self.partial_pool.unknown.remote([x.traj_id for x in handed]))
        fresh = [x for x in handed if x.traj_id in unknown]
        if fresh:
            await self.partial_pool.update.remote(fresh, [], [])
        return fresh

    async def _place_all(self, trajs: list[Any]) -> tuple[int, int, int]:
        """Place each trajectory; those with no live rollout wait as orphans."""
        continued = restarted = 0
        for traj in trajs:
            dst, resumed = await self._place(traj)
            if dst is None:
                self.orphans.append(traj)
                continue
            continued += resumed
            restarted += not resumed
        return continued, restarted, len(self.orphans)

    async def _place_orphans(self) -> None:
        orphans, self.orphans = self.orphans, []
        continued, restarted, waiting = await self._place_all(orphans)
        if continued or restarted:
            self.events.append(
                {
                    "kind": "adopted",
                    "at_s": time.time() - self.t0_s,
                    "continued": continued,
                    "restarted": restarted,
                    "waiting": waiting,
                }
            )

    async def _place(self, traj: Any) -> tuple[str | None, bool]:
        """Continue ``traj`` on a rollout of its version, else restart it on any (one version)."""
        for rid, handle in list(self.rollouts.items()):
            pinned = await _try(handle.pin.remote(traj.version))
            if pinned and await _done(handle.adopt.remote([traj])):
                return rid, True
        for rid, handle in list(self.rollouts.items()):
            snap = await _try(handle.snapshot.remote())
            if snap and snap["version"] >= 0 and await _try(handle.pin.remote(snap["version"])):
                fresh = traj.restarted(snap["version"])  # its turns and observations go too
                if await _done(handle.adopt.remote([fresh])):
                    self.restarted.append(traj.traj_id)
                    return rid, False
        return None, False

    def _record(self, snaps: list[dict]) -> None:
        for s in snaps:
            self.kv_series.append(
                {
                    "at_s": s["at_s"],
                    "replica_id": s["replica_id"],
                    "version": s["version"],
                    "kv_usage": s["kv_usage"],
                    "kv_tokens": sum(kv for _, kv in s["trajectories"]),
                    "trajectories": len(s["trajectories"]),
                    "gen_tokens": s["gen_tokens"],
                }
            )

    async def health(self, since: int) -> dict:
        """Deaths and recoveries after the first ``since`` events (the driver polls this)."""
        return {
            "events": [e for e in self.events[since:]],
            "dead": sorted(self.dead),
            "orphans": len(self.orphans),
        }

    async def report(self) -> dict:
        """Events and KV time series collected so far."""
        return {
            "events": self.events,
            "kv_series": self.kv_series,
            "dead": sorted(self.dead),
            "restarted": list(self.restarted),
            "orphans": list(self.orphans),
        }


async def _aw(x: Any) -> Any:
    return await x


async def _try(call: Any) -> Any:
    """The call's result, or None when that rollout is dead too (the next check finds it)."""
    try:
        return await call
    except Exception:
        return None


async def _done(call: Any) -> bool:
    """Whether the call returned (False: that rollout died; the next check finds it)."""
    try:
        await call
    except Exception:
        return False
    return True
