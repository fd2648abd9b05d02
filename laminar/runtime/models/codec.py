"""Text <-> token ids for the task, without importing transformers for the tiny model.

The prompt pool encodes prompts and the rollouts decode answers for the reward; both are light
actors, so the char vocabulary is a plain mapping. A pretrained model's tokenizer is loaded with
transformers from its local directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from laminar.runtime.models import tinymodel

_SENTINEL = "\u2063laminar-turn\u2063"  # an assistant turn's content, found again in the render


class CharCodec:
    """The tiny model's char vocabulary (``laminar.runtime.models.tinymodel.vocab``)."""

    def __init__(self) -> None:
        self._ids = tinymodel.vocab()
        self._chars = {i: t for t, i in self._ids.items() if t not in tinymodel.SPECIALS}
        self.bos_id = self._ids[tinymodel.BOS]
        self.eos_id = self._ids[tinymodel.EOS]
        self.pad_id = self._ids[tinymodel.PAD]
        self.stop_ids = (self.eos_id,)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, one per character (no specials)."""
        try:
            return [self._ids[c] for c in text]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tiny vocabulary") from None

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; specials are dropped."""
        return "".join(self._chars.get(i, "") for i in ids)

    def encode_lenient(self, text: str) -> list[int]:
        """Ids of ``text`` lowered, any other character outside the vocabulary read as a
        space (an environment's prompt is not written for the tiny vocabulary)."""
        space = self._ids[" "]
        return [self._ids.get(c, space) for c in text.lower()]

    def observation_ids(self, message: dict, last_id: int | None = None) -> list[int]:
        """An environment's message after an answer, as the tiny model sees it: BOS and the
        content (``encode_lenient``), like a prompt of its own."""
        return [self.bos_id, *self.encode_lenient(message["content"])]


class HfCodec:
    """A Hugging Face tokenizer loaded from a local model directory.

    ``stop_ids``: every id that ends an answer — the tokenizer's EOS and the generation
    config's ``eos_token_id`` (an id or a list: chat models stop at their end-of-turn token).
    """

    def __init__(self, model_dir: str):
        from transformers import AutoTokenizer

        from laminar.runtime.models.pretrained import stop_token_ids

        self._tok: Any = AutoTokenizer.from_pretrained(model_dir)
        self.bos_id = self._tok.bos_token_id
        self.stop_ids = stop_token_ids(model_dir, self._tok.eos_token_id)
        eos = self._tok.eos_token_id
        self.eos_id = eos if eos is not None else self.stop_ids[0]
        self.pad_id = self._tok.pad_token_id if self._tok.pad_token_id is not None else self.eos_id
        self.chat = bool(getattr(self._tok, "chat_template", None))

    def chat_ids(self, text: str) -> list[int]:
        """``text`` as the user's turn through the chat template, ready for the answer."""
        return self.messages_ids([{"role": "user", "content": text}])

    def messages_ids(self, messages: Sequence[dict]) -> list[int]:
        """Chat ``messages`` through the chat template, ready for the assistant's answer."""
        messages = [dict(m) for m in messages]
        out = self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self._tok.encode(out, add_special_tokens=False))

    def observation_ids(self, message: dict, last_id: int | None = None) -> list[int]:
        """The ids that follow an assistant turn (its last id ``last_id``, the stop token it
        ended with) when the environment answers ``message``, ready for the next turn.

        With a chat template: what the template renders between an assistant turn's end and
        the next generation prompt — the turn's closing (less the stop token already
        generated), the message, the generation prompt. A template that cannot render the
        message's role (one without a ``tool`` role) renders it as the user's. Without one:
        the content on a line of its own. A ValueError when the template cannot render it."""
        if not self.chat:
            return self.encode("\n" + message["content"] + "\n")
        head = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _SENTINEL}]
        before = self._render(head, False)
        try:
            after = self._render([*head, dict(message)], True)
        except Exception:  # jinja2's TemplateError and whatever a template raises
            try:
                after = self._render([*head, {"role": "user", "content": message["content"]}],
                                     True)  # fmt: skip
            except Exception as e:
                raise ValueError(f"the chat template cannot render a {message['role']!r} "
                                 f"message: {type(e).__name__}: {e}"[:300]) from None  # fmt: skip
        if not after.startswith(before) or _SENTINEL not in before:
            raise ValueError("the chat template renders a conversation's start differently "
                             "once it goes on: its turns cannot be appended")  # fmt: skip
        closing = before[before.rindex(_SENTINEL) + len(_SENTINEL) :]
        stop = self._tok.decode([last_id], skip_special_tokens=False) if last_id is not None else ""
        if stop and closing.startswith(stop):
            closing = closing[len(stop) :]  # the turn's stop token was generated already
        return self.encode(closing + after[len(before) :])

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self._tok.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=False
        )

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


def make_codec(model_type: str, model_dir: str) -> CharCodec | HfCodec:
    """The codec for a ``tiny`` or ``pretrained`` model."""
    return CharCodec() if model_type == "tiny" else HfCodec(model_dir)


def prompt_ids(codec: CharCodec | HfCodec, text: str) -> list[int]:
    """The chat template's rendering when the tokenizer has one, else BOS (when the
    vocabulary has one) + the prompt's ids."""
    if getattr(codec, "chat", False):
        return codec.chat_ids(text)
    head = [codec.bos_id] if codec.bos_id is not None else []
    return head + codec.encode(text)


def prompt_tokens(codec: CharCodec | HfCodec, p: Any, max_len: int | None = None) -> list[int]:
    """A task's prompt ``p`` as ids: an environment's chat messages through the chat template
    (joined plainly, one per line, without one), else :func:`prompt_ids` of its text. An
    environment's text fits the tiny vocabulary (``CharCodec.encode_lenient``). Longer than
    ``max_len`` (``workload.max_prompt_len``): its last ``max_len`` ids, which keep the turn
    the answer follows (an engine refuses a prompt over its length)."""
    env = getattr(p, "sample", None) is not None or bool(getattr(p, "error", ""))
    if getattr(p, "messages", ()) and getattr(codec, "chat", False):
        ids = codec.messages_ids(p.messages)
    elif env and isinstance(codec, CharCodec):
        ids = [codec.bos_id, *codec.encode_lenient(p.text)]
    else:
        ids = prompt_ids(codec, p.text)
    if not ids:  # an engine refuses an empty prompt (a failed sample's, without a BOS)
        ids = [codec.bos_id if codec.bos_id is not None else codec.eos_id]
    if max_len is not None and len(ids) > max_len:
        ids = ids[len(ids) - max_len :]
    return ids
