"""Multi-turn trajectories (issue 29, item 2), fast: the turn loop
(``laminar.runtime.rollout.turns``) with fake engines and a scripted environment that forces the
turns (``tests/runtime/turn_envs.py``).

A trajectory's turns share its one weight version; observations are context, masked out of the
loss; budgets hold over all turns; a move between turns or mid-turn continues the conversation
where it was; a rollout lost mid-conversation is recovered from the partial pool at the turn it
had reached; an environment that raises, hangs or answers nonsense costs its trajectory only;
the trace has ``turns`` and ``tool_latency_s`` and replays.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time

import pytest

from laminar.config.runtime import PythonTask
from laminar.runtime.data.manager import RolloutManager
from laminar.runtime.data.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.models.codec import CharCodec
from laminar.runtime.records import PromptGroup, Traj
from laminar.runtime.rollout.turns import Turns
from laminar.runtime.rollout.worker import RolloutWorker
from laminar.runtime.run.ckptfiles import decode_pools, encode_pools
from laminar.runtime.run.outputs import env_errors, trajectory_frame
from laminar.runtime.train.grpo import build_batch, trained_tokens
from laminar.runtime.weights import ShmWeightStore
from laminar.traces.schema import TOOL_COLUMNS
from laminar.traces.validate import validate_frame
from tests.runtime.fakes import FakeEngine, LocalHandle
from tests.runtime.harness import System, run_laminar
from tests.runtime.turn_envs import question

MAX_RESPONSE_LEN, MAX_PROMPT_LEN = 64, 16
CODEC = CharCodec()


def _task(turns=3, max_turns=8, entry="tests.runtime.turn_envs:make", timeout_s=5.0, **args):
    return PythonTask(entry=entry, args={"turns": turns, **args}, max_turns=max_turns,
                      timeout_s=timeout_s)  # fmt: skip


def _worker(rid: str, task: PythonTask, step_s=0.001, **kw) -> RolloutWorker:
    common = dict(seed=0, max_response_len=MAX_RESPONSE_LEN, max_batch=16, samples_per_prompt=2,
                  model_type="tiny", model_dir="", flush_interval_s=0.01,
                  max_prompt_len=MAX_PROMPT_LEN)  # fmt: skip
    return RolloutWorker(rid, FakeEngine(step_s), task=task, **{**common, **kw})


def _system(tmp_path, task: PythonTask, *, n=2, prompts_per_step=4, workers=2, step_s=0.001,
            repack=True) -> System:  # fmt: skip
    t0 = time.time()
    store = ShmWeightStore(tmp_path / "weights", "{}")
    prompts = PromptPool(task, seed=0, max_answer_len=MAX_RESPONSE_LEN - 1,
                         samples_per_prompt=n, prompts_per_step=prompts_per_step,
                         prefetch_steps=1.0, model_type="tiny", model_dir="",
                         max_prompt_len=MAX_PROMPT_LEN)  # fmt: skip
    partial, buffer = PartialResponsePool(), ExperienceBuffer(n, t0)
    pools = {"prompts": LocalHandle(prompts), "partial": LocalHandle(partial),
             "buffer": LocalHandle(buffer)}  # fmt: skip
    ws = {f"r{i}": _worker(f"r{i}", task, step_s, samples_per_prompt=n) for i in range(workers)}
    manager = RolloutManager({k: LocalHandle(w) for k, w in ws.items()}, LocalHandle(partial),
                             interval_s=0.01, repack_enabled=repack, t0_s=t0,
                             buffer=pools["buffer"], prompts=pools["prompts"])  # fmt: skip
    return System(store, prompts, partial, buffer, ws, manager, prompts_per_step, pools, t0)


def _answers(t: Traj) -> list[str]:
    """Each assistant turn's text (between the observations)."""
    out, at = [], 0
    for start, end in [*t.obs_spans, (len(t.tokens), len(t.tokens))]:
        out.append(CODEC.decode(t.tokens[at:start]))
        at = end
    return out


def _want(t: Traj, turns: int) -> list[str]:
    n = 1 + t.prompt_id % 4
    return [letter * count for count, letter in (question(n, k) for k in range(1, turns + 1))]


def _check_conversation(t: Traj, turns: int) -> None:
    """``t`` played ``turns`` turns, each answered right, observations where they belong."""
    assert t.turns == turns and len(t.obs_spans) == len(t.obs_messages) == turns - 1
    assert _answers(t) == _want(t, turns)
    assert len(t.logprobs) == len(t.tokens)
    for (start, end), message in zip(t.obs_spans, t.obs_messages, strict=True):
        assert t.tokens[start] == CODEC.bos_id and CODEC.decode(t.tokens[start:end]) == message[
            "content"]  # fmt: skip
        assert all(math.isnan(x) for x in t.logprobs[start:end])
        assert message["role"] == "tool" and message["name"] == "asker"
    generated = [x for i, x in enumerate(t.logprobs) if not any(s <= i < e for s, e in t.obs_spans)]
    assert generated and not any(math.isnan(x) for x in generated)
    assert t.generated_tokens == len(generated) == sum(len(a) + 1 for a in _answers(t))


# -- a whole laminar-mode runtime -------------------------------------------------------------


def test_a_multi_turn_run_records_every_turn_and_loses_nothing(tmp_path):
    s = _system(tmp_path, _task(turns=3, latency_s=0.02))
    asyncio.run(run_laminar(s, steps=4))
    assert len(s.consumed) == 4 * 4 * 2 and len({t.traj_id for t in s.consumed}) == 32
    ledger = asyncio.run(s.buffer.ledger())
    for row in ledger:
        t = row["traj"]
        _check_conversation(t, 3)
        assert t.reward == 1.0 and t.env_error == "" and t.finish_reason == "stop"
        assert t.tool_s >= 2 * 0.02 and 0.02 <= t.tool_latency_s < 2.0
    frame = trajectory_frame(ledger, 4)
    assert (frame["turns"] == 3).all() and (frame["tool_latency_s"] >= 0.02).all()
    generated = {(r["traj"].prompt_id, r["traj"].sample_index): r["traj"].generated_tokens
                 for r in ledger}  # fmt: skip
    keys = zip(frame["prompt_id"], frame["sample_index"], strict=True)
    assert list(frame["response_len"]) == [generated[k] for k in keys]
    trace = validate_frame(frame, "trajectories")  # the schema the simulator reads
    assert set(TOOL_COLUMNS) <= set(trace.columns)
    assert env_errors(ledger)["env_errors"] == {}


def test_all_turns_share_one_version_a_new_one_waits_for_the_trajectory(tmp_path):
    """A replica holding a trajectory that waits for its environment loads no new weights."""
    task = _task(turns=2, latency_s=0.3)
    s = _system(tmp_path, task, workers=1)
    w = s.workers["r0"]

    async def scenario():
        from tests.runtime.harness import boot

        await boot(s)
        g = PromptGroup(0, tuple(s.prompts.group(0).prompt_ids), 2)
        await w.submit_groups([g])
        while not w.stepping:
            await asyncio.sleep(0.005)
        s.store.publish(1, b"weights 1")
        assert await w.load_latest() == 0  # held: its turns keep version 0
        while w.tasks:
            await asyncio.gather(*list(w.tasks.values()))
        await w.streamer.flush()
        assert await w.load_latest() == 1
        return await s.buffer.ledger()

    ledger = asyncio.run(scenario())
    assert [r["traj"].version for r in ledger] == [0, 0]
    for r in ledger:
        _check_conversation(r["traj"], 2)


async def _run_until(s: System, steps: int, finished: set[str]) -> None:
    """``run_laminar`` that stops once the trainer had its steps and ``finished`` are in the
    buffer (a trajectory slower than the others is not left behind in the partial pool)."""
    from tests.runtime.harness import boot, trainer

    await boot(s, load=False)
    loops = [asyncio.create_task(w.run_laminar(poll_s=0.002)) for w in s.workers.values()]
    mgr = asyncio.create_task(s.manager.run())
    await asyncio.wait_for(trainer(s, steps), timeout=60)
    while not finished <= set(await s.buffer.finished_ids(sorted(finished))):
        await asyncio.sleep(0.01)
    await s.manager.stop()
    await mgr
    for w in s.workers.values():
        await w.stop()
    await asyncio.gather(*loops)


def test_misbehaving_step_costs_that_trajectory_only(tmp_path):
    s = _system(tmp_path, _task(turns=3, misbehave=True, timeout_s=0.3), prompts_per_step=8)
    t = time.perf_counter()
    first = {f"p{i}-s{k}" for i in range(16) for k in range(2)}
    asyncio.run(asyncio.wait_for(_run_until(s, 2, first), 30))
    assert time.perf_counter() - t < 10  # a hung step costs its timeout, not the run
    ledger = asyncio.run(s.buffer.ledger())
    assert len(s.consumed) == 2 * 8 * 2
    by_kind: dict[int, set] = {}
    for row in ledger:
        tr = row["traj"]
        by_kind.setdefault(tr.prompt_id % 8, set()).add(
            (tr.reward, tr.env_error.partition(":")[0], tr.turns))
    assert by_kind[0] == {(1.0, "", 3)} and by_kind[6] == {(1.0, "", 3)}
    assert by_kind[1] == {(0.0, "step_raised", 2)} and by_kind[2] == {(0.0, "step_timeout", 2)}
    assert by_kind[3] == {(0.0, "step_invalid", 2)} and by_kind[4] == {(0.0, "step_invalid", 2)}
    assert by_kind[5] == {(0.0, "reward_invalid", 3)}
    summary = env_errors(ledger)
    assert set(summary["env_errors"]) == {"step_raised", "step_timeout", "step_invalid",
                                          "reward_invalid"}  # fmt: skip
    examples = summary["env_error_examples"]
    assert "RuntimeError: the tool crashed on q" in examples["step_raised"]
    assert "'content' must be a str, got int 42" in ";".join(
        r["traj"].env_error for r in ledger if r["traj"].prompt_id % 8 == 3)
    assert "expected a message dict or None, got str" in ";".join(
        r["traj"].env_error for r in ledger if r["traj"].prompt_id % 8 == 4)


def test_a_plain_step_function_runs_in_threads_and_overlaps(tmp_path):
    """A synchronous ``step`` (0.2 s each) of 16 trajectories at once: their waits overlap."""
    s = _system(tmp_path, _task(turns=2, latency_s=0.2, entry="tests.runtime.turn_envs:make_sync"),
                prompts_per_step=8, workers=1)  # fmt: skip
    t = time.perf_counter()
    asyncio.run(run_laminar(s, steps=1))
    took = time.perf_counter() - t
    ledger = asyncio.run(s.buffer.ledger())
    assert all(r["traj"].reward == 1.0 and r["traj"].turns == 2 for r in ledger)
    assert took < 0.2 * 16 / 2  # serialized it would take 16 x 0.2 s


# -- budgets and limits -----------------------------------------------------------------------


async def _one(w: RolloutWorker, tmp_path, prompt_id=0) -> Traj:
    store = ShmWeightStore(tmp_path / "w1", "{}")
    store.publish(0, b"weights 0")
    pools = {"prompts": None, "partial": LocalHandle(PartialResponsePool()),
             "buffer": LocalHandle(ExperienceBuffer(1, time.time()))}  # fmt: skip
    await w.start()
    await w.attach(store, pools, time.time())
    await w.load_latest()
    p = await w._prompt(prompt_id)
    from laminar.runtime.models.codec import prompt_tokens

    g = PromptGroup(prompt_id, tuple(prompt_tokens(w.codec, p, MAX_PROMPT_LEN)), 1)
    await w.submit_groups([g])
    while w.tasks:
        await asyncio.gather(*list(w.tasks.values()))
    await w.streamer.close()
    (row,) = await pools["buffer"]._obj.ledger()
    return row["traj"]


def test_the_turn_limit_ends_the_conversation(tmp_path):
    w = _worker("r0", _task(turns=6, max_turns=2))
    t = asyncio.run(_one(w, tmp_path))
    assert t.turns == 2 and t.finish_reason == "stop" and t.reward == 0.0  # 2 of 6 turns
    assert _answers(t) == _want(t, 2)
    assert w.gen.env.calls[("q0", 2)] == 0  # no step after the last allowed turn


def test_the_response_budget_bounds_generated_tokens_over_all_turns(tmp_path):
    # prompt 3 (n=4): answers of 1, 2, 3, 4 ... letters, + EOS each: 2 + 3 + 4 + (3 of 5)
    w = _worker("r0", _task(turns=20, max_turns=20), max_response_len=12, max_prompt_len=64)
    t = asyncio.run(_one(w, tmp_path, prompt_id=3))
    assert t.generated_tokens == 12 and t.finish_reason == "length"
    assert t.turns == 4 and len(t.tokens) > 12  # observations are not counted


def test_the_context_bounds_prompt_turns_and_observations(tmp_path):
    """An observation that leaves no room in max_prompt_len + max_response_len ends the
    trajectory, cut (``length``), without it."""
    w = _worker("r0", _task(turns=20, max_turns=20), max_response_len=20, max_prompt_len=8)
    t = asyncio.run(_one(w, tmp_path, prompt_id=3))
    assert t.kv_tokens <= 28 and t.finish_reason == "length" and t.generated_tokens <= 20
    assert t.tokens[-1] == CODEC.eos_id  # it ended after an answer, the observation left out


# -- moves: between turns, mid-turn; recovery --------------------------------------------------


def test_a_move_between_turns_continues_the_conversation_elsewhere(tmp_path):
    task = _task(turns=3, latency_s=0.5)
    a, b = _worker("r0", task), _worker("r1", task)
    store = ShmWeightStore(tmp_path / "w", "{}")
    store.publish(0, b"weights 0")
    partial, buffer = PartialResponsePool(), ExperienceBuffer(1, time.time())
    pools = {"prompts": None, "partial": LocalHandle(partial), "buffer": LocalHandle(buffer)}

    async def scenario():
        for w in (a, b):
            await w.start()
            await w.attach(store, pools, time.time())
            await w.load_latest()
        g = PromptGroup(1, tuple(PromptPool(task, seed=0, max_answer_len=63, samples_per_prompt=1,
                        prompts_per_step=1, prefetch_steps=None, model_type="tiny",
                        model_dir="").group(1).prompt_ids), 1)  # fmt: skip
        await a.submit_groups([g])
        while not a.stepping:  # its first turn is done: it waits for the environment
            await asyncio.sleep(0.005)
        t = time.perf_counter()
        (moved,) = await a.release(["p1-s0"])
        assert time.perf_counter() - t < 0.3  # the environment's wait was cancelled
        assert moved.turns == 1 and not moved.obs_spans and moved.tokens[-1] == CODEC.eos_id
        assert not a.trajs and not a.tasks and await a.pin(0)
        await b.adopt([moved])
        while b.tasks:
            await asyncio.gather(*list(b.tasks.values()))
        await b.streamer.flush()
        return moved, await buffer.ledger()

    _, ledger = asyncio.run(scenario())
    (row,) = ledger
    t = row["traj"]
    _check_conversation(t, 3)
    assert t.reward == 1.0 and t.migrations == 1 and t.replica_id == "r1"
    assert a.gen.env.calls[("q1", 1)] == 1 and b.gen.env.calls[("q1", 1)] == 1  # asked again
    assert [rid for rid, _ in b.engine.submitted][1:] == ["p1-s0#1.t2", "p1-s0#1.t3"]


def test_a_move_mid_turn_continues_that_turn(tmp_path):
    task = _task(turns=2)
    a, b = _worker("r0", task, step_s=0.02), _worker("r1", task)
    store = ShmWeightStore(tmp_path / "w", "{}")
    store.publish(0, b"weights 0")
    partial, buffer = PartialResponsePool(), ExperienceBuffer(1, time.time())
    pools = {"prompts": None, "partial": LocalHandle(partial), "buffer": LocalHandle(buffer)}

    async def scenario():
        for w in (a, b):
            await w.start()
            await w.attach(store, pools, time.time())
            await w.load_latest()
        g = PromptGroup(1, (CODEC.bos_id, *CODEC.encode("3*a=")), 1)  # then "4*b="
        await a.submit_groups([g])
        t = a.trajs["p1-s0"]
        while not t.obs_spans or len(t.tokens) < t.obs_spans[-1][1] + 2:
            await asyncio.sleep(0.002)  # two tokens into its second turn
        (moved,) = await a.release(["p1-s0"])
        assert moved.turns == 2 and len(moved.obs_spans) == 1
        assert not Turns.awaiting_step(b.turns, moved)  # mid-turn: it generates on
        await b.adopt([moved])
        while b.tasks:
            await asyncio.gather(*list(b.tasks.values()))
        await b.streamer.flush()
        return await buffer.ledger()

    (row,) = asyncio.run(scenario())
    _check_conversation(row["traj"], 2)
    assert row["traj"].reward == 1.0


def test_a_lost_rollout_is_recovered_at_the_turn_it_reached(tmp_path):
    """The partial pool holds each observation with its tokens: a trajectory recovered from it
    (its rollout declared dead) continues its conversation on another rollout."""
    s = _system(tmp_path, _task(turns=4, latency_s=0.05), prompts_per_step=2, repack=False)

    async def scenario():
        from tests.runtime.harness import boot

        await boot(s)
        a = s.workers["r0"]
        groups = [s.prompts.group(i) for i in range(2)]
        await a.submit_groups(groups)
        while not any(len(t.obs_spans) >= 2 for t in a.trajs.values()):
            await asyncio.sleep(0.005)
        await a.streamer.flush()
        pool = {t.traj_id: t for t in s.partial.pending()}
        for t in pool.values():  # the pool's copy: spans and messages with their tokens
            assert len(t.obs_spans) == len(t.obs_messages) == t.turns - 1
            assert all(end <= len(t.tokens) for _, end in t.obs_spans)
        # r0 "dies": its tasks stop where they are, the manager recovers from the pool
        for task in list(a.tasks.values()):
            task.cancel()
        await asyncio.gather(*list(a.tasks.values()), return_exceptions=True)
        a.streamer.loop_task.cancel()
        s.manager.rollouts.pop("r0")
        await s.manager.recover("r0", reason="test")
        b = s.workers["r1"]
        while b.tasks:
            await asyncio.gather(*list(b.tasks.values()))
        await b.streamer.flush()
        return pool, await s.buffer.ledger()

    pool, ledger = asyncio.run(scenario())
    recovered = {r["traj"].traj_id: r["traj"] for r in ledger}
    assert set(recovered) == set(pool) and len(recovered) == 4
    for tid, t in recovered.items():
        _check_conversation(t, 4)
        assert t.reward == 1.0 and t.migrations == 1 and t.replica_id == "r1"
        assert t.tokens[: len(pool[tid].tokens)] == pool[tid].tokens  # continued, not redone


# -- the trainer's view; checkpoints; evaluation ---------------------------------------------


def _played() -> Traj:
    nan = math.nan
    return Traj("p0-s0", 0, 0, (1, 5, 6), 0, 32, tokens=[7, 7, 2, 1, 8, 9, 8, 2],
                logprobs=[-0.5, -0.5, -0.1, nan, nan, nan, -0.3, -0.2], turns=2,
                obs_spans=[(3, 6)], obs_messages=[{"role": "tool", "content": "x"}],
                tool_s=0.25)  # fmt: skip


def test_observations_are_masked_out_of_the_loss():
    t = _played()
    b = build_batch([t], [1.0], pad_id=0)
    p = len(t.prompt_ids)
    mask = b.loss_mask[0].tolist()
    # logits at position j predict token j+1: response token i sits at p - 1 + i
    assert [mask[p - 1 + i] for i in range(len(t.tokens))] == [1, 1, 1, 0, 0, 0, 1, 1]
    assert b.response_tokens == trained_tokens([t]) == t.generated_tokens == 5
    old = b.old_logprobs[0].tolist()
    assert old[p - 1] == pytest.approx(-0.5) and math.isnan(old[p - 1 + 3])


def test_a_multi_turn_trajectory_survives_a_checkpoint():
    t = _played()
    t.env_error, t.source_id = "step_raised: x", "q0"
    pools = {"partial": [t], "buffer": {"rows": [], "duplicates": []},
             "prompts": {"issued": 1, "consumed_steps": 0}}  # fmt: skip
    back = decode_pools(json.loads(json.dumps(encode_pools(pools))))["partial"][0]
    assert back.obs_spans == t.obs_spans and back.obs_messages == t.obs_messages
    assert (back.turns, back.tool_s, back.env_error, back.source_id) == (2, 0.25, t.env_error, "q0")
    assert back.tokens == t.tokens and math.isnan(back.logprobs[4])
    old = encode_pools(pools)
    for key in ("turns", "obs_spans", "obs_messages", "tool_s", "env_error", "source_id"):
        del old["partial"][0][key]  # a checkpoint of an earlier Laminar
    assert decode_pools(json.loads(json.dumps(old)))["partial"][0].turns == 0
    bad = encode_pools(pools)
    bad["partial"][0]["obs_spans"] = [[3, 99]]
    with pytest.raises(ValueError, match="obs_spans"):
        decode_pools(json.loads(json.dumps(bad)))


def test_restarting_a_trajectory_drops_its_turns():
    fresh = _played().restarted(3)
    assert (fresh.version, fresh.tokens, fresh.turns, fresh.obs_spans, fresh.tool_s) == (
        3, [], 1, [], 0.0)  # fmt: skip


def test_held_out_evaluation_plays_every_turn(tmp_path):
    w = _worker("r0", _task(turns=3))

    async def scenario():
        await _one(w, tmp_path)  # started, attached, version 0
        return await w.evaluate([0, 1, 2], samples=2)

    assert asyncio.run(scenario()) == [1.0] * 6


def test_conversation_and_awaiting_step():
    turns = Turns(None, CODEC, max_turns=4, max_context=None, stop_ids=frozenset({CODEC.eos_id}))
    from laminar.runtime.tasks.base import Prompt

    t = _played()
    t.tokens = [CODEC.encode("a")[0], CODEC.encode("a")[0], CODEC.eos_id, CODEC.bos_id,
                *CODEC.encode("xy"), CODEC.encode("b")[0], CODEC.eos_id]  # fmt: skip
    t.obs_spans = [(3, 6)]
    p = Prompt(0, "2*a=", "", ({"role": "user", "content": "2*a="},), {"id": 0})
    assert turns.conversation(p, t) == [
        {"role": "user", "content": "2*a="}, {"role": "assistant", "content": "aa"},
        {"role": "tool", "content": "x"}, {"role": "assistant", "content": "b"}]  # fmt: skip
    assert turns.awaiting_step(t)  # its last turn ended: the environment is next
    t.tokens = t.tokens[:6]
    assert not turns.awaiting_step(t)  # right after an observation: the model is next


def test_the_documented_multi_turn_example_plays(tmp_path):
    """docs/environments.md's complete multi-turn example, as written there, loads and plays a
    conversation with a tool call."""
    from pathlib import Path

    from laminar.runtime.envs.load import load_env

    doc = (Path(__file__).resolve().parents[2] / "docs" / "environments.md").read_text()
    section = doc[doc.index("### A complete multi-turn example") :]
    start = section.index("```python\n") + 10
    code = section[start : section.index("\n```", start)]
    (tmp_path / "laminar_doc_tools.py").write_text(code)
    try:
        env = load_env(PythonTask(entry="laminar_doc_tools:make", module_dir=str(tmp_path),
                                  args={"delay_s": 0.01}), seed=0)  # fmt: skip
    finally:
        sys.modules.pop("laminar_doc_tools", None)
        sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]
    s = env.prompt(3)
    assert s == env.prompt(3) and s["messages"][0]["role"] == "system"
    question = s["messages"][-1]["content"]
    x, a, b = question.split()[3], question.split()[4].rstrip(":"), question.split()[-1][:-1]
    conv = [*s["messages"], {"role": "assistant", "content": f"<tool>convert {x} {a} {b}</tool>"}]
    message = asyncio.run(env.step(s, conv))
    assert message["role"] == "tool" and message["content"] == f"{s['answer']:g} {b}"
    done = [*conv, message, {"role": "assistant", "content": f"\\boxed{{{s['answer']:g}}}"}]
    assert asyncio.run(env.step(s, done)) is None and env.reward(s, done) == 1.1


def test_a_job_on_engines_another_job_started_answers_its_own_task():
    """A benchmark (and the pretrained e2e) runs several jobs on the same engines: a replica
    attached to a job of another task adopts that task (it once kept the first job's verifier:
    a user environment's rewards were all the verifier's 0)."""
    from laminar.config.runtime import RepeatTask

    w = _worker("r0", RepeatTask())
    assert w.turns is None
    pools = {"prompts": None, "partial": None, "buffer": None}

    async def attach(task):
        await w.attach(None, pools, time.time(), task, 0)
        await w.streamer.close()

    asyncio.run(attach(_task(turns=2, max_turns=4)))
    assert w.turns is not None and w.gen.max_turns == 4
    asyncio.run(attach(None))  # no task given: the replica keeps the one it has
    assert w.turns is not None
    asyncio.run(attach(RepeatTask()))
    assert w.turns is None and w.task_cfg == RepeatTask()
