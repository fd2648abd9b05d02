"""Trainer ranks outside Ray: warm-up exported as version 0 through the streamed path; a DCP
checkpoint taken on 1 rank restores exactly on 2 (resharded), atomically, in its root."""

from __future__ import annotations

import os

import numpy as np
import pytest

from laminar.config import load_config
from laminar.runtime.weights import ShmWeightStore, list_versions
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # spawns torch.distributed processes (~20 s)


def _cfg(tmp_path):
    return load_config(
        preset="tiny-cpu",
        overrides=[
            "runtime.warmup.steps=2",
            "runtime.warmup.batch=4",
            f"runtime.warmup.cache_dir={tmp_path / 'cache'}",
            "runtime.trainer_cpus=''",
        ],
    ).model_dump(mode="json")


def _full(model):
    return {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
        for k, v in model.state_dict().items()
    }


def _save(rank, world, init, cfg, work, store_root, ckpt_root):
    import torch

    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work, rank, world)
    r.join(init)
    info = r.build()
    r.prepare()
    store = ShmWeightStore(store_root, info["config_json"])
    path = r.begin_export(0, store)
    r.export(path)
    r.commit_export(0, path)
    with torch.no_grad():
        for p in r.model.parameters():
            p.add_(0.01)
    r.save_checkpoint(ckpt_root, 3)
    return _full(r.model)


def _load(rank, world, init, cfg, work, ckpt_root):
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work, rank, world)
    r.join(init)
    r.build()
    r.prepare()
    version = r.load_checkpoint(ckpt_root)
    return version, _full(r.model)


def test_export_and_checkpoint_restore_on_more_ranks(tmp_path):
    cfg = _cfg(tmp_path)
    store_root, ckpt = tmp_path / "w", tmp_path / "ckpt"
    (saved,) = run_ranks(1, _save, cfg, str(tmp_path / "a"), str(store_root), str(ckpt))
    versions = list_versions(store_root)
    assert [v for v, _ in versions] == [0]
    assert sorted(os.listdir(versions[0][1])) == [
        "config.json",
        "laminar-version.json",
        "model.safetensors",
    ]
    assert sorted(os.listdir(ckpt)) == ["v0000000003"]  # no hidden half-checkpoint left
    parts = run_ranks(2, _load, cfg, str(tmp_path / "b"), str(ckpt))
    for version, restored in parts:
        assert version == 3
        for k, v in saved.items():
            np.testing.assert_array_equal(restored[k], v)
