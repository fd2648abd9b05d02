"""A tiny Llama model and a char-level tokenizer, created locally and saved in Hugging Face format.

Nothing is downloaded: the vocabulary is a fixed list of characters and the model starts from a
seeded random init. A Llama config (not Qwen2) keeps the char vocabulary round-tripping exactly
through ``AutoTokenizer``; vLLM's CPU attention needs ``head_dim >= 32``, so heads are 64 wide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPECIALS = (PAD, BOS, EOS)
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789*=:|>.,+- "
HEAD_DIM = 64


def vocab() -> dict[str, int]:
    """Token -> id: the three specials first (pad 0, bos 1, eos 2), then one id per character."""
    return {tok: i for i, tok in enumerate((*SPECIALS, *CHARS))}


def build_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` that maps each character to one token, and back exactly."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=vocab(), unk_token=PAD))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=PAD
    )


def llama_config(
    *, layers: int, hidden: int, max_positions: int, dtype: str = "float32"
) -> dict[str, Any]:
    """Keyword arguments of ``transformers.LlamaConfig`` for the tiny policy model."""
    if hidden % HEAD_DIM:
        raise ValueError(f"hidden ({hidden}) must be a multiple of head_dim {HEAD_DIM}")
    ids = vocab()
    heads = hidden // HEAD_DIM
    return dict(
        vocab_size=len(ids),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=HEAD_DIM,
        max_position_embeddings=max_positions,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
        tie_word_embeddings=False,
        dtype=dtype,
    )


def build_model(config_kwargs: dict[str, Any], seed: int) -> Any:
    """A freshly initialised ``LlamaForCausalLM`` (seeded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**config_kwargs))


def save_model_dir(model: Any, tokenizer: Any, out: str | Path) -> Path:
    """Save config, weights (``model.safetensors``) and tokenizer files into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
