"""One trainer memory model (``laminar.specs.trainmemory``): what it scales with, and the
runtime's start-up check (``laminar.specs.runfit``) giving ``laminar config fit``'s verdict and
message on every shipped preset and on configs that do not fit."""

from __future__ import annotations

import pytest

from laminar.cli import main
from laminar.config import list_presets, load_config
from laminar.errors import ConfigError
from laminar.specs.model import catalog_spec
from laminar.specs.runfit import check_runtime_fit, runtime_model_spec
from laminar.specs.trainmemory import trainer_memory

TOO_BIG = ["runtime.model.layers=64", "runtime.model.hidden=8192",
           "runtime.grpo.activation_checkpointing=false"]  # fmt: skip


def test_states_fall_as_one_over_ranks_and_the_layout_divides_them():
    spec = catalog_spec("qwen2.5-7b")
    one = trainer_memory(spec, tokens=8192)
    for n in (2, 4, 8):
        m = trainer_memory(spec, tokens=8192, ranks=n)
        assert m.states == pytest.approx(one.states / n)
        assert m.unsharded == pytest.approx(one.unsharded)  # what every rank holds anyway
    assert one.states == pytest.approx(16 * spec.total_params)  # fp32 weights, grads, Adam
    tp = trainer_memory(spec, tokens=8192, tp=2)
    assert tp.states == pytest.approx(one.states / 2) and tp.activations < one.activations
    cp = trainer_memory(spec, tokens=8192, cp=2)
    assert cp.activations == pytest.approx(one.activations / 2)
    moe = catalog_spec("qwen3-30b-a3b")
    assert (trainer_memory(moe, tokens=4096, ep=8).states
            < trainer_memory(moe, tokens=4096).states / 4)  # fmt: skip
    with pytest.raises(ValueError, match="tp"):
        trainer_memory(spec, tokens=1, tp=0)


def test_checkpointing_and_chunks_cut_activations():
    spec = catalog_spec("qwen2.5-7b")
    full = trainer_memory(spec, tokens=4096, checkpointing=False, logprob_chunk_tokens=0)
    ckpt = trainer_memory(spec, tokens=4096, checkpointing=True, logprob_chunk_tokens=0)
    chunk = trainer_memory(spec, tokens=4096, checkpointing=True, logprob_chunk_tokens=512)
    assert ckpt.activations < full.activations / 3
    # an eighth of the tokens, and fp32 logits turned into their gradient in place (4 bytes a
    # logit) against the model's head: logits, their log-softmax and its gradient (12)
    assert chunk.logprobs == pytest.approx(ckpt.logprobs / 8 / 3)
    bf16 = trainer_memory(spec, tokens=4096, logprob_chunk_tokens=512, compute_bytes=2)
    assert bf16.logprobs == pytest.approx(chunk.logprobs * 6 / 4)  # + the bf16 logits
    ref = trainer_memory(spec, tokens=4096, reference=True)
    assert ref.reference == pytest.approx(4 * spec.total_params)


def test_the_tiny_spec_is_the_tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    from laminar.runtime.models import tinymodel

    cfg = load_config(preset="tiny-cpu", overrides=["runtime.model.layers=3",
                                                     "runtime.model.hidden=192"])  # fmt: skip
    spec = runtime_model_spec(cfg)
    kw = tinymodel.llama_config(layers=3, hidden=192, max_positions=64)
    model = LlamaForCausalLM(LlamaConfig(**kw))
    assert spec.total_params == sum(p.numel() for p in model.parameters())
    assert spec.vocab == len(tinymodel.vocab())


@pytest.mark.parametrize("preset", list_presets())
def test_config_fit_and_the_runtime_check_agree_on_every_preset(preset, capsys):
    fit = check_runtime_fit(load_config(preset=preset))
    assert main(["config", "fit", "--preset", preset]) == (0 if fit.ok else 2)
    out = capsys.readouterr().out
    assert f"fits (runtime trainer, {fit.device})" in out


@pytest.mark.parametrize("extra", [TOO_BIG, ["runtime.trainer_ranks=4", *TOO_BIG]])
def test_a_config_that_does_not_fit_is_refused_by_both_with_one_message(extra, capsys):
    from laminar.runtime.run.inputs import check_inputs

    cfg = load_config(preset="tiny-cpu", overrides=extra)
    fit = check_runtime_fit(cfg)
    assert not fit.ok
    args = ["config", "fit", "--preset", "tiny-cpu"] + [a for x in extra for a in ("--set", x)]
    assert main(args) == 2
    err = capsys.readouterr().err
    with pytest.raises(ConfigError) as refused:
        check_inputs(cfg)
    assert str(refused.value) in err
    assert refused.value.key_path == fit.key_path == "runtime.model"  # states dominate
    assert "activation_checkpointing=true" in fit.reason


def test_on_cuda_the_check_names_the_ranks_needed():
    cfg = load_config(preset="tiny-cpu", overrides=[
        "runtime.device=cuda", "runtime.model.layers=48", "runtime.model.hidden=4096",
        "runtime.grpo.micro_batch_tokens=1024", "cluster.hardware=h100-sxm"])  # fmt: skip
    fit = check_runtime_fit(cfg)
    assert not fit.ok and fit.key_path == "runtime.trainer_ranks"
    need = int(fit.reason.rsplit("at least ", 1)[1])
    ok = load_config(preset="tiny-cpu", overrides=[
        "runtime.device=cuda", "runtime.model.layers=48", "runtime.model.hidden=4096",
        "runtime.grpo.micro_batch_tokens=1024", "cluster.hardware=h100-sxm",
        f"runtime.trainer_ranks={need}"])  # fmt: skip
    assert check_runtime_fit(ok).ok



def test_a_pretrained_architecture_laminar_does_not_size_is_checked_as_llama_with_a_warning(
    tmp_path,
):
    import json
    from types import SimpleNamespace

    from laminar.errors import LaminarWarning

    keys = dict(model_type="brand_new", hidden_size=256, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=512, vocab_size=1000)  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(keys))
    model = SimpleNamespace(type="pretrained", path=str(tmp_path))
    cfg = SimpleNamespace(runtime=SimpleNamespace(model=model))
    with pytest.warns(LaminarWarning, match=r"'brand_new' is not an architecture.*memory check"):
        spec = runtime_model_spec(cfg)
    # embedding, untied head, final norm; per layer q/k/v/o, gate/up/down, two RMSNorms
    layer = 4 * 256 * 256 + 3 * 256 * 512 + 2 * 256
    assert spec.total_params == 2 * 1000 * 256 + 256 + 2 * layer
