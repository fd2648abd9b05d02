"""A local Hugging Face causal-LM directory (``runtime.model = {type: pretrained, path}``):
checked before anything starts, loaded by the trainer ranks shard by shard
(``laminar.runtime.train.shardload``: no rank reads the whole model), started by vLLM as is.

A usable directory has ``config.json`` (with ``model_type`` and ``architectures``), weights in
``*.safetensors``, ``tokenizer.json`` and ``tokenizer_config.json``, and a chat template (in
``tokenizer_config.json`` or ``chat_template.jinja``). Nothing is ever looked up on a hub.
"""

from __future__ import annotations

import json
from pathlib import Path

from laminar.errors import LaminarError


class ModelDirError(LaminarError):
    """A model directory cannot be used; the message names the file."""


def _json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelDirError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelDirError(f"{path}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise ModelDirError(f"{path}, line {e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise ModelDirError(f"{path}: expected a JSON object")
    return obj


def check_model_dir(path: str | Path) -> dict:
    """Raise :class:`ModelDirError` naming the file at fault; return ``config.json``."""
    d = Path(path).expanduser()
    if not d.is_dir():
        raise ModelDirError(f"{d}: not a directory (runtime.model.path)")
    config = _json(d / "config.json")
    for key in ("model_type", "architectures"):
        if key not in config:
            raise ModelDirError(f"{d / 'config.json'}: no '{key}'")
    if not any(d.glob("*.safetensors")):
        raise ModelDirError(f"{d}: no *.safetensors weights")
    _json(d / "tokenizer.json")
    tok_cfg = _json(d / "tokenizer_config.json")
    if not tok_cfg.get("chat_template") and not (d / "chat_template.jinja").exists():
        raise ModelDirError(
            f"{d / 'tokenizer_config.json'}: no chat_template (nor chat_template.jinja)"
        )
    return config


def stop_token_ids(path: str | Path, eos_id: int | None) -> tuple[int, ...]:
    """The tokenizer's EOS and every ``eos_token_id`` of ``generation_config.json``."""
    ids = [] if eos_id is None else [int(eos_id)]
    gen = Path(path) / "generation_config.json"
    if gen.exists():
        extra = _json(gen).get("eos_token_id")
        for i in extra if isinstance(extra, list) else [extra]:
            if isinstance(i, int) and i not in ids:
                ids.append(i)
    if not ids:
        raise ModelDirError(f"{path}: no EOS token (tokenizer or generation_config.json)")
    return tuple(ids)


def saved_dtype(config: dict) -> str | None:
    """The dtype the weights were saved in (``config.json``), which exports keep: vLLM then
    loads each version in the model's own precision, at half the bytes of fp32 for bf16."""
    dt = config.get("dtype") or config.get("torch_dtype")
    return dt if isinstance(dt, str) and dt in ("float32", "float16", "bfloat16") else None
