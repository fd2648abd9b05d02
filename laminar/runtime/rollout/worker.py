"""A rollout replica (paper §3.1): one generation engine, its in-flight trajectories, and the
rules for when it takes prompts and when it pulls weights.

Trajectory-level asynchrony (§2.4, §3.2): every trajectory is generated with exactly one weight
version, so a replica loads new weights only when it holds no trajectory. In laminar mode it
keeps admitting prompt groups while its version is the newest; once a newer one is published it
stops admitting, finishes (or is released of) its long tail, pulls the newest version and
starts again. Repack (§5) releases it early by moving its tail elsewhere; the rollout manager
decides, this class only carries out :meth:`release` and :meth:`adopt`.

An environment with ``step`` (``runtime.task``) makes trajectories of several turns; their loop
is :class:`laminar.runtime.rollout.turns.Turns`'s, the engine's part of it (one turn's tokens)
:meth:`RolloutWorker._decode`'s.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from laminar.runtime.cluster.procfs import shm_files_of
from laminar.runtime.faults.watchdog import EngineWatchdog
from laminar.runtime.models.codec import make_codec, prompt_tokens
from laminar.runtime.profiling.profile import EngineStepRecorder
from laminar.runtime.records import PromptGroup, Traj
from laminar.runtime.rollout.asking import AskAgain
from laminar.runtime.rollout.engine import Engine
from laminar.runtime.rollout.stream import PartialStreamer
from laminar.runtime.rollout.turns import Turns
from laminar.runtime.tasks.base import EVAL_STREAM
from laminar.runtime.tasks.make import make_task
from laminar.runtime.weights import WeightSource

ASK_AGAIN_MAX_POLLS = 32  # after empty answers, ask the prompt pool at least every 32 polls


def engine_footprint() -> dict:
    """Child processes of this process and the /dev/shm files they map."""
    import psutil

    pids, shm = [], set()
    for child in psutil.Process().children(recursive=True):
        pids.append((child.pid, child.create_time()))
        shm |= shm_files_of(child.pid)
    return {"pids": pids, "shm": sorted(shm)}


def _innermost(engine: Engine) -> Engine:
    """The engine behind any wrappers (each keeps the one it wraps as ``inner``)."""
    while "inner" in getattr(engine, "__dict__", {}):
        engine = engine.__dict__["inner"]
    return engine


class RolloutWorker:
    """One engine replica and the trajectories it is generating."""

    def __init__(
        self,
        replica_id: str,
        engine: Engine,
        *,
        task: Any,
        seed: int,
        max_response_len: int,
        max_batch: int,
        samples_per_prompt: int,
        model_type: str,
        model_dir: str,
        flush_interval_s: float,
        engine_stall_s: float = 120.0,
        max_prompt_len: int | None = None,
    ):
        self.replica_id = replica_id
        self.engine = engine
        self.codec = make_codec(model_type, model_dir)
        self.stop_ids = frozenset(self.codec.stop_ids)
        self.max_response_len = max_response_len
        self.max_prompt_len = max_prompt_len
        self.max_batch = max_batch
        self.samples_per_prompt = samples_per_prompt
        self.flush_interval_s = flush_interval_s
        self.streamer: PartialStreamer | None = None
        self.watchdog = EngineWatchdog(engine_stall_s)
        self._set_task(task, seed)

    def _set_task(self, task: Any, seed: int) -> None:
        """The task (or environment) whose prompts this replica answers and scores."""
        self.task_cfg = task
        self.gen = make_task(task, seed=seed, max_answer_len=self.max_response_len - 1)
        self.reward_timeout_s = getattr(task, "reward_timeout_s", None)
        self.turns: Turns | None = None  # a multi-turn environment's loop (None: one turn)
        if getattr(self.gen, "max_turns", 1) > 1:
            mp = self.max_prompt_len
            context = None if mp is None else mp + self.max_response_len
            self.turns = Turns(self.gen, self.codec, max_turns=self.gen.max_turns,
                               max_context=context, stop_ids=self.stop_ids)  # fmt: skip

    async def start(self) -> dict:
        """Build the engine and warm it up (the first step is slow).

        Returns the seconds taken and what the engine created on this machine (its processes
        and shared-memory files), so a driver can clean up after this replica if it dies.
        """
        t = time.perf_counter()
        await self.engine.start()
        async for _ in self.engine.generate(f"{self.replica_id}-warmup", [0, 1], 2):
            pass
        self.footprint = engine_footprint()
        return {"start_s": time.perf_counter() - t, **self.footprint}

    async def kill_engine(self) -> list[int]:
        """Fault injection (``kill-engine``): SIGKILL this replica's engine processes, as an
        engine crash under a live actor. Done here, on the engine's machine, where the pids
        recorded at :meth:`start` mean something (a driver on another machine cannot see
        them); returns the pids killed."""
        from laminar.runtime.cluster.nodes import kill_here

        return kill_here(getattr(self, "footprint", {}))

    async def attach(
        self, weights: WeightSource, pools: dict, t0_s: float, task: Any = None, seed: int = 0
    ) -> None:
        """Join a training job: its weight path, its pools, its clock, its task (when given and
        not the one this replica answers: a job on engines another job started); start from
        scratch.

        A replica serves one job at a time; a benchmark runs several jobs on the same engines.
        """
        if task is not None and task != self.task_cfg:
            self._set_task(task, seed)
        if self.streamer is not None:
            await self.streamer.close()
        self.weights = weights
        self.prompt_pool = pools["prompts"]
        self.t0_s = t0_s
        self.version = -1  # the engine holds no published weights of this job yet
        self.trajs: dict[str, Traj] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.requests: dict[str, str] = {}  # traj_id -> its engine request now
        self.stepping: set[str] = set()  # waiting for their environment (between turns)
        self.leaving: set[str] = set()  # being released: no new turn starts
        self.pins = 0  # adopts in progress: no weight load until they land
        self.stopping = False
        self.loop_task: asyncio.Task | None = None
        self.loads: list[tuple[float, int, float]] = []  # (at_s, version, load_s)
        self.gen_tokens = 0
        self.profile = EngineStepRecorder(self.replica_id, t0_s)
        runner = _innermost(self.engine)  # a wrapper would take the attribute, not pass it on
        if hasattr(runner, "step_listener"):
            runner.step_listener = self._engine_step
        self.streamer = PartialStreamer(pools["partial"], pools["buffer"], self.flush_interval_s)
        self.streamer.start()

    def _engine_step(self, at_unix_s, latencies_s, prefill_seqs, prefill_tokens, *sched) -> None:
        """The engine ran a step: record it with the KV tokens our trajectories hold."""
        kv_tokens = sum(t.kv_tokens for t in self.trajs.values() if t.traj_id not in self.stepping)
        self.profile.record(at_unix_s, latencies_s, prefill_seqs, prefill_tokens, kv_tokens, *sched)

    def now_s(self) -> float:
        return time.time() - self.t0_s

    # -- weights --------------------------------------------------------------------------

    async def load_latest(self) -> int:
        """Load the newest published version if newer and the replica is empty; return version.

        Looking a version up reads a directory; it runs in a thread, so the event loop that
        streams every trajectory's tokens never waits on the file system."""
        latest = await asyncio.to_thread(self.weights.latest)
        if latest is None or latest[0] <= self.version or self.trajs or self.pins:
            return self.version
        version, path = latest
        t = time.perf_counter()
        await self.engine.load_weights(path)
        self.loads.append((self.now_s(), version, time.perf_counter() - t))
        self.version = version
        return version

    async def _latest_version(self) -> int:
        """The newest published version (-1 before the first)."""
        latest = await asyncio.to_thread(self.weights.latest)
        return -1 if latest is None else latest[0]

    # -- generation -----------------------------------------------------------------------

    async def submit(self, trajs: list[Traj]) -> None:
        """Start (or continue, for migrated ones) generating ``trajs`` on this replica."""
        for t in trajs:
            if t.version != self.version:
                raise ValueError(f"{t.traj_id} has version {t.version}, replica {self.version}")
            t.replica_id = self.replica_id
            if self.turns is not None and t.turns == 0:
                t.turns = 1  # a multi-turn task's trajectory: its first turn begins
            self.trajs[t.traj_id] = t  # held from now on: no weight load until it finishes
        self.watchdog.progress()  # a fresh request gets the full stall allowance
        await self.streamer.register(trajs)
        for t in trajs:
            self.tasks[t.traj_id] = asyncio.create_task(self._generate(t))

    async def _generate(self, t: Traj) -> None:
        if self.turns is not None:
            return await self._generate_turns(t)
        reason = await self._decode(t, t.remaining_tokens)
        self.tasks.pop(t.traj_id, None)
        if reason is None:  # aborted (the caller of abort owns it), or the engine died
            return
        t.gen_end_s = self.now_s()
        p = await self._prompt(t.prompt_id)
        reward, t.env_error = await self._score(p, t.tokens, reason)
        if p.sample is not None:  # an environment's sample: its own id goes into the trace
            t.source_id = str(p.sample.get("id"))
        self._finish(t, reason, reward)

    async def _generate_turns(self, t: Traj) -> None:
        """A multi-turn trajectory: its turns (``Turns.play``), then the environment's reward
        of the whole conversation (0 when a ``step`` failed)."""
        try:
            reason, p = await self.turns.play(
                t,
                self._decode,
                lambda: self._prompt(t.prompt_id),
                leaving=self.leaving,
                stepping=self.stepping,
                changed=self.streamer.changed,
            )
        finally:
            self.tasks.pop(t.traj_id, None)
        if reason is None:  # it left: released, or its engine died (the manager recovers it)
            return
        t.gen_end_s = self.now_s()
        if t.env_error:
            reward = 0.0
        else:
            reward, t.env_error = await self.turns.reward(p, t)
        if p.sample is not None:
            t.source_id = str(p.sample.get("id"))
        self._finish(t, reason, reward)

    def _request_id(self, t: Traj) -> str:
        """Its engine request now: one per (holder, turn); the first turn keeps the plain
        ``traj#migrations``."""
        rid = f"{t.traj_id}#{t.migrations}"
        return rid if t.turns <= 1 else f"{rid}.t{t.turns}"

    async def _decode(self, t: Traj, max_tokens: int) -> str | None:
        """Generate ``t``'s current turn (or the rest of it: prompt + tokens so far are
        re-prefilled) up to ``max_tokens``; its finish reason (``stop``/``length``), or None
        when it was aborted or the engine died under it (the trajectory is still held in
        ``self.trajs``: the manager recovers it)."""
        if t.traj_id in self.leaving:  # released before its request began
            return None
        reason = None
        request_id = self._request_id(t)
        prompt = [*t.prompt_ids, *t.tokens]  # migrated: prompt + partial tokens, re-prefilled
        self.requests[t.traj_id] = request_id
        if t.turns > 1:
            self.watchdog.progress()  # a turn after its environment's wait: a fresh allowance
        try:
            async for d in self.engine.generate(request_id, prompt, max_tokens):
                t.tokens.extend(d.token_ids)
                t.logprobs.extend(d.logprobs)
                self.gen_tokens += len(d.token_ids)
                self.watchdog.progress()
                reason = d.finish_reason
        except Exception as e:  # the engine died under it: the trajectory waits for recovery
            self.watchdog.failed(e)
            return None
        finally:
            self.requests.pop(t.traj_id, None)
        if reason == "abort":
            return None  # the caller of abort owns it now
        return "stop" if reason == "stop" else "length"

    async def _prompt(self, prompt_id: int, stream: int = 0) -> Any:
        """The task's prompt; an environment's is asked for off the event loop."""
        aprompt = getattr(self.gen, "aprompt", None)
        if aprompt is not None:
            return await aprompt(prompt_id, stream=stream)
        return self.gen.prompt(prompt_id, stream=stream)

    async def _score(self, prompt: Any, tokens: list[int], reason: str) -> tuple[float, str]:
        """The task's reward of an answer (its stop token dropped), and why it is 0 when the
        reward could not be had (else empty). A verifier with a timeout
        (``task.reward_timeout_s``) runs in a thread, off the event loop; past it, 0. An
        environment's reward runs off the event loop within ``task.timeout_s``
        (``laminar.runtime.envs``)."""
        stopped = reason == "stop" and tokens and tokens[-1] in self.stop_ids
        body = tokens[:-1] if stopped else tokens
        text = self.codec.decode(body)
        ascore = getattr(self.gen, "ascore", None)
        if ascore is not None:
            return await ascore(prompt, text, finished=reason == "stop")
        if self.reward_timeout_s is None:  # the repeat task's rule: a string comparison
            return self.gen.reward(prompt, text, finished=reason == "stop"), ""
        call = asyncio.to_thread(self.gen.reward, prompt, text, finished=reason == "stop")
        try:
            return await asyncio.wait_for(call, self.reward_timeout_s), ""
        except TimeoutError:
            return 0.0, f"reward_timeout: the verifier took over {self.reward_timeout_s:g} s"

    def _finish(self, t: Traj, reason: str, reward: float) -> None:
        t.finish_reason = reason
        t.reward = reward
        del self.trajs[t.traj_id]
        self.streamer.finished(t)

    async def submit_groups(self, groups: list[PromptGroup]) -> None:
        """Start every sample of ``groups`` with the current weight version."""
        now = self.now_s()
        trajs = [
            t for g in groups for t in g.trajectories(self.version, self.max_response_len, now)
        ]
        await self.submit(trajs)

    async def run_groups(self, groups: list[PromptGroup]) -> int:
        """Sync mode: generate ``groups`` to the end and hand them to the buffer."""
        await self.submit_groups(groups)
        while self.tasks:
            await asyncio.gather(*list(self.tasks.values()), return_exceptions=True)
        await self.streamer.flush()
        return self.version

    async def run_laminar(self, poll_s: float = 0.01) -> None:
        """Laminar mode: admit groups while on the newest version, else drain and reload."""
        self.loop_task = asyncio.create_task(self._laminar_loop(poll_s))
        await self.loop_task

    async def _laminar_loop(self, poll_s: float) -> None:
        asking = AskAgain(poll_s, ASK_AGAIN_MAX_POLLS * poll_s)  # laminar/runtime/rollout/asking.py
        while not self.stopping and self.watchdog.error is None:  # a dead engine admits nothing
            latest = await self._latest_version()
            if latest > self.version:
                await self.load_latest()  # no-op while trajectories remain (drain, §2.4)
            elif self.version >= 0:
                k = (self.max_batch - len(self.trajs)) // self.samples_per_prompt
                if (k > 0 or not self.trajs) and asking.may_ask(time.monotonic(), latest):
                    groups = await self._take(max(k, 1))
                    asking.answered(time.monotonic(), len(groups))
                    await self.submit_groups(groups)
            await asyncio.sleep(poll_s)

    async def _take(self, groups: int) -> list[PromptGroup]:
        """New groups from the prompt pool, handed out to this replica: until it asks again
        (after registering them), the pool keeps them for recovery should it die meanwhile."""
        return await self.prompt_pool.take.remote(groups, self.replica_id, self.max_response_len)

    async def evaluate(self, prompt_ids_list: list[int], samples: int) -> list[float]:
        """Rewards of ``samples`` answers to each held-out prompt, with the current weights.

        Held-out prompts come from their own stream and bypass the pools: they are not training
        data and are not counted in the run's ledger or throughput.
        """

        async def one(pid: int, k: int) -> float:
            p = await self._prompt(pid, EVAL_STREAM)
            tokens, reason = [], None
            rid = f"eval-v{self.version}-{pid}-{k}"
            ids = prompt_tokens(self.codec, p, self.max_prompt_len)
            if self.turns is not None:  # every turn, as in training (nothing recorded)
                return await self._evaluate_turns(rid, pid, k, p, ids)
            async for d in self.engine.generate(rid, ids, self.max_response_len):
                tokens.extend(d.token_ids)
                reason = d.finish_reason
            reward, _ = await self._score(p, tokens, "stop" if reason == "stop" else "length")
            return reward

        jobs = [one(pid, k) for pid in prompt_ids_list for k in range(samples)]
        return list(await asyncio.gather(*jobs))

    async def _evaluate_turns(self, rid: str, pid: int, k: int, p: Any, ids: list[int]) -> float:
        """One held-out multi-turn conversation's reward (0 when its engine failed)."""
        t = Traj(rid, pid, k, tuple(ids), self.version, self.max_response_len, turns=1)

        async def decode(t: Traj, max_tokens: int) -> str | None:
            reason = None
            async for d in self.engine.generate(f"{rid}.t{t.turns}", [*ids, *t.tokens],
                                                max_tokens):  # fmt: skip
                t.tokens.extend(d.token_ids)
                t.logprobs.extend(d.logprobs)
                reason = d.finish_reason
            return "stop" if reason == "stop" else "length"

        async def prompt() -> Any:
            return p

        reason, _ = await self.turns.play(t, decode, prompt)
        if reason is None or t.env_error:
            return 0.0
        return (await self.turns.reward(p, t))[0]

    # -- repack and recovery (carried out for the rollout manager) --------------------------

    async def snapshot(self) -> dict:
        """What repack needs: version, KV tokens used/capacity, the unfinished trajectories.

        Also the health check: raises :class:`EngineFailure` when the engine died or stalled
        (the manager then treats this replica as dead, §3.3).
        """
        # busy: a request in the engine (one waiting for its environment is not the engine's)
        self.watchdog.check(self.engine, busy=bool(self.requests))
        s = self.engine.stats()
        return {
            "replica_id": self.replica_id,
            "version": self.version,
            "kv_capacity_tokens": s.kv_capacity_tokens,
            "kv_usage": s.kv_usage,
            "running": s.running,
            "waiting": s.waiting,
            "max_batch": self.max_batch,
            "trajectories": [(t.traj_id, t.kv_tokens) for t in self.trajs.values()],
            "gen_tokens": self.gen_tokens,
            "at_s": self.now_s(),
        }

    async def pin(self, version: int) -> bool:
        """Hold the current weights for an incoming move; False if the version differs."""
        if version < 0 or version != self.version or self.stopping:  # -1: no weights yet
            return False
        self.pins += 1
        return True

    async def unpin(self) -> None:
        self.pins = max(0, self.pins - 1)

    async def release(self, traj_ids: list[str], *, moving: bool = True) -> list[Traj]:
        """Abort these trajectories and hand them over with their partial tokens (§5.1).

        ``moving``: they continue elsewhere (the new replica streams them from now on);
        otherwise their last tokens are still streamed from here (a stop at the end of a run).
        A multi-turn trajectory waiting for its environment has that wait cancelled: it leaves
        between two turns and asks ``step`` again where it goes (``laminar.runtime.rollout.turns``).
        """
        live = [tid for tid in traj_ids if tid in self.tasks]
        tasks = [self.tasks[tid] for tid in live]
        self.leaving.update(live)  # none of them starts another turn or environment call
        try:
            await self.engine.abort([self.requests[tid] for tid in live if tid in self.requests])
            for tid in live:
                if tid in self.stepping:
                    self.tasks[tid].cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self.leaving.difference_update(live)
        out = []
        for tid in live:
            t = self.trajs.get(tid)
            if t is not None and t.finish_reason is None:  # finished ones went to the buffer
                del self.trajs[tid]
                out.append(t)
                if moving:
                    self.streamer.forget(tid)
        return out

    async def adopt(self, trajs: list[Traj], *, pinned: bool = True) -> None:
        """Continue trajectories moved here: prompt + partial tokens, their one version."""
        try:
            await self.submit([replace(t, migrations=t.migrations + 1) for t in trajs])
        finally:
            if pinned:
                await self.unpin()

    async def stop(self) -> list[str]:
        """Stop generating: abort everything (tokens so far stay in the partial pool)."""
        self.stopping = True
        if self.loop_task is not None:  # let it finish submitting what it already took
            await self.loop_task
        live = list(self.tasks)
        if live:
            await self.release(live, moving=False)
        await self.streamer.close()
        return live

    async def stats(self) -> dict:
        return {
            "replica_id": self.replica_id,
            "gen_tokens": self.gen_tokens,
            "loads": self.loads,
            "engine_steps": self.profile.table(),
            "kv_capacity_tokens": getattr(self.engine, "kv_capacity_tokens", None),
        }

    async def shutdown(self) -> None:
        """Stop the engine (its processes and shared memory go with it)."""
        await self.engine.shutdown()
