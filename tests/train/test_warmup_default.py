"""The supervised warm-up (issue 27, item 4): none by default for a pretrained model; the tiny
model keeps its 100 steps; a pretrained model's warm-up, when asked for, writes no cache; the
trainer's other ranks take rank 0's warmed weights by broadcast, never from a cache file."""

from __future__ import annotations

import pytest
import torch

from laminar.config import LaminarConfig, load_config
from tests.train.dist import run_ranks

PRETRAINED = "runtime.model={type: pretrained, path: /models/nowhere}"


def test_warmup_steps_default_by_model_type():
    assert load_config().runtime.warmup.steps == 100  # tiny
    assert load_config(preset="tiny-cpu").runtime.warmup.steps == 100
    pre = load_config(preset="tiny-cpu", overrides=[PRETRAINED])
    assert pre.runtime.warmup.steps == 0
    assert pre.runtime.warmup.batch == 64  # the rest of the preset's warm-up stays
    asked = load_config(preset="tiny-cpu", overrides=[PRETRAINED, "runtime.warmup.steps=3"])
    assert asked.runtime.warmup.steps == 3
    again = LaminarConfig.model_validate(pre.model_dump(mode="json"))  # config.yaml read back
    assert again.runtime.warmup.steps == 0


def test_a_pretrained_warmup_writes_no_cache(tmp_path):
    """The warm-up of a ``pretrained`` config trains in memory and leaves no file (the tiny
    model and its codec stand in for the pretrained one: only the config's type decides)."""
    from laminar.runtime.models import tinymodel
    from laminar.runtime.models.codec import make_codec
    from laminar.runtime.train.warmup import warm_model

    cache = tmp_path / "cache"
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            PRETRAINED,
            "runtime.warmup.steps=2",
            "runtime.warmup.batch=2",
            f"runtime.warmup.cache_dir={cache}",
        ],
    )
    model = tinymodel.build_model(tinymodel.llama_config(layers=1, hidden=64, max_positions=64), 0)
    before = model.model.embed_tokens.weight.detach().clone()
    info = warm_model(model, make_codec("tiny", ""), cfg)
    assert info["warmup_cached"] is False and info["warmup_loss"] == info["warmup_loss"]
    assert not cache.exists()
    assert not torch.equal(model.model.embed_tokens.weight, before)  # it did train


def _warm(rank, world, init, cfgs, work_dir):
    from laminar.runtime.train.ranks import TrainerRank
    from laminar.runtime.train.warmup import share_warm_model, warm_model

    r = TrainerRank(cfgs[rank], work_dir, rank, world)
    r.join(init, threads=1)
    r.build()
    before = r.model.model.embed_tokens.weight.detach().clone()  # the same init on both
    info = warm_model(r.model, r.codec, r.cfg) if rank == 0 else {}
    share_warm_model(r.model, info, "cpu")
    info["moved"] = not torch.equal(before, r.model.model.embed_tokens.weight)
    return info, {k: v.clone() for k, v in r.model.state_dict().items()}


@pytest.mark.slow  # spawns two torch.distributed processes
def test_other_ranks_take_rank0s_warm_model_by_broadcast(tmp_path):
    def cfg(rank):
        return load_config(
            preset="tiny-cpu",
            overrides=[
                "runtime.trainer_cpus=''",
                "runtime.warmup.steps=2",
                "runtime.warmup.batch=2",
                f"runtime.warmup.cache_dir={tmp_path / f'cache{rank}'}",
                "runtime.model.layers=1",
            ],
        ).model_dump(mode="json")

    (info0, w0), (info1, w1) = run_ranks(2, _warm, [cfg(0), cfg(1)], str(tmp_path / "w"))
    assert info0["warmup_s"] > 0 and info1 == {"moved": True} and info0["moved"]
    assert list((tmp_path / "cache0").iterdir())  # rank 0 cached the tiny model's warm-up
    assert not (tmp_path / "cache1").exists()  # rank 1 never looked for a cache
    assert w0.keys() == w1.keys()
    for k in w0:
        assert (w0[k] == w1[k]).all(), k
