"""Random-weight Hugging Face model directories of real architectures, created locally.

Tests, the GPU check and demos need a model directory shaped like a real checkpoint —
``config.json``, ``model.safetensors``, a BPE ``tokenizer.json`` with a chat template — without
downloading one. The tokenizer is a byte-level BPE trained here with ``tokenizers`` on a few
lines of arithmetic; the model is a seeded random init of the named architecture (Qwen2 by
default, the architecture of Qwen2.5, tied embeddings included).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Published shapes (Hugging Face config.json of Qwen/Qwen2.5-0.5B, -1.5B and -7B).
QWEN25_SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
    ),
}  # fmt: skip


def corpus(lines: int = 400) -> list[str]:
    """Arithmetic questions and answers: what the BPE learns its merges from."""
    out = []
    for i in range(lines):
        a, b = (i * 37) % 97, (i * 53) % 89
        out.append(f"What is {a} plus {b}? The answer is \\boxed{{{a + b}}}.")
        out.append(f"Compute {a} times {b}. So the result is {a * b}.")
    return out


def build_tokenizer(vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer trained locally, with chat specials and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def qwen2_config(
    tokenizer: Any, *, shape: str | None = None, max_positions: int = 1024, **overrides: Any
) -> Any:
    """A ``Qwen2Config``: a published ``shape`` (``QWEN25_SHAPES``) or a tiny default
    (2 layers, hidden 128, head_dim 64 — vLLM's CPU attention needs head_dim >= 32), tied."""
    from transformers import Qwen2Config

    base: dict[str, Any] = dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=len(tokenizer), tie_word_embeddings=True,
    )  # fmt: skip
    if shape is not None:
        base = dict(QWEN25_SHAPES[shape])
    base.update(overrides)
    base["vocab_size"] = max(base["vocab_size"], len(tokenizer))
    base.setdefault("dtype", "float32")
    return Qwen2Config(
        **base,
        max_position_embeddings=max_positions,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        architectures=["Qwen2ForCausalLM"],
    )


def make_model_dir(
    out: str | Path,
    *,
    seed: int = 0,
    dtype: str = "float32",
    weights: bool = True,
    device: str = "cpu",
    **cfg: Any,
) -> Path:
    """Write a random-weight Qwen2 model directory (weights, config, BPE tokenizer with a chat
    template, generation config) into ``out``; ``cfg`` goes to :func:`qwen2_config`.
    ``weights=False`` writes no weights (for vLLM's ``load_format="dummy"``); ``device``
    initialises them there (a GPU makes billions of parameters quick)."""
    import torch
    from transformers import Qwen2ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    config = qwen2_config(tok, dtype=dtype, **cfg)
    if weights:
        torch.manual_seed(seed)
        with torch.device(device):
            model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
        model.save_pretrained(out, safe_serialization=True)
        del model
        if device != "cpu":
            torch.cuda.empty_cache()  # the caller's later work may need this GPU's memory
    else:
        config.save_pretrained(out)
    tok.save_pretrained(out)
    gen = {"eos_token_id": [config.eos_token_id, tok.pad_token_id], "do_sample": True}
    (out / "generation_config.json").write_text(json.dumps(gen))
    return out


def arithmetic_jsonl(out: str | Path, n: int = 64, seed: int = 0) -> Path:
    """A JSONL task of ``n`` small additions (``prompt``, ``answer``)."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        lines.append(json.dumps({"prompt": f"What is {a} plus {b}?", "answer": a + b}))
    Path(out).write_text("\n".join(lines) + "\n")
    return Path(out)
