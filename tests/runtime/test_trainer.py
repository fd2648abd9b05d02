"""The trainer outside Ray: warm-up publishes version 0, checkpoints restore exactly, a restarted
trainer keeps versions increasing, the final model is a loadable Hugging Face directory."""

from __future__ import annotations

import pytest
import torch

from laminar.config import load_config
from laminar.runtime.trainer import Trainer
from laminar.runtime.weights import ShmWeightStore


def _trainer(tmp_path, name):
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            "runtime.warmup.steps=2",
            "runtime.warmup.batch=4",
            f"runtime.warmup.cache_dir={tmp_path / 'cache'}",
            "runtime.trainer_cpus=''",
        ],
    )
    t = Trainer(cfg.model_dump(mode="json"), str(tmp_path / name), buffer=None)
    return t, t.setup()


@pytest.mark.slow  # ~5 s, transformers' import
def test_checkpoint_resume_and_final_model(tmp_path):
    t, info = _trainer(tmp_path, "a")
    store = ShmWeightStore(tmp_path / "w", info["config_json"])
    t.warmup(store)
    assert store.latest()[0] == 0
    with torch.no_grad():
        for p in t.model.parameters():
            p.add_(0.01)
    t.version = 3
    ckpt = t.save_checkpoint(str(tmp_path / "ckpt.pt"))
    t.version = 5  # the first trainer published further before it died
    t.publish()
    again, _ = _trainer(tmp_path, "b")
    assert again.resume(store, ckpt) == 5  # versions never go back
    for a, b in zip(t.model.state_dict().values(), again.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    out = t.save_model(str(tmp_path / "model"))
    from transformers import AutoTokenizer, LlamaForCausalLM

    loaded = LlamaForCausalLM.from_pretrained(out)
    assert torch.equal(loaded.lm_head.weight, t.model.lm_head.weight)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.decode(tok("17*k=kk").input_ids) == "17*k=kk"  # char vocabulary, exact
