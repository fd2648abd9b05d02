"""Every config field is read by the code it configures (issue 28, item 3): a field that neither
the simulator nor the runtime reads is a setting a user changes for nothing.

Reading is found in the source (an attribute ``.name`` or a key ``"name"`` outside
``laminar/config/``); the few fields the config itself maps onto others are listed with where
they go. The model's fields describe what is served, so the runtime reads each of them too, or
this file says why it needs nothing of one.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from laminar.config import LaminarConfig

LAMINAR = Path(__file__).resolve().parents[1] / "laminar"
SOURCES = {
    p: p.read_text()
    for p in LAMINAR.rglob("*.py")
    if "config" not in p.relative_to(LAMINAR).parts[:1] and "_native" not in p.parts
}
MAPPED_BY_THE_CONFIG = {
    "runtime.kill_rollout_at_step": "runtime.faults.inject (kill-rollout)",
    "runtime.kill_trainer_at_step": "runtime.faults.inject (kill-trainer)",
}
MODEL_FIELDS_THE_RUNTIME_NEEDS_NOT = {
    "model.name": "names the simulated model; the runtime trains runtime.model",
    "model.hf_config": "sizes the simulated model; the runtime reads its model's own config.json",
    "model.dtype": "the simulated weights' dtype; the runtime's is runtime.model's export dtype",
    "model.spec": "a simulated model's size facts; the runtime's model has its own weights",
}


def _leaves(model: type[BaseModel], prefix: str = ""):
    for name, f in model.model_fields.items():
        args = typing.get_args(f.annotation) or (f.annotation,)
        subs = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if subs:
            for sub in subs:
                yield from _leaves(sub, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def _read_in(path: str, where: dict[Path, str]) -> bool:
    name = path.rsplit(".", 1)[-1]
    pattern = re.compile(rf"\.{name}\b|[\"']{name}[\"']")
    return any(pattern.search(text) for text in where.values())


def test_the_walk_sees_the_tree():
    leaves = list(_leaves(LaminarConfig))
    assert len(leaves) > 50 and "model.rollout_quant" in leaves and "runtime.grpo.lr" in leaves


def test_every_field_is_read_by_the_simulator_or_the_runtime():
    unread = [
        p for p in _leaves(LaminarConfig)
        if p not in MAPPED_BY_THE_CONFIG and not _read_in(p, SOURCES)
    ]  # fmt: skip
    assert not unread, f"config fields nothing reads: {unread}"


def test_every_model_field_is_served_by_the_runtime_or_says_why_not():
    runtime = {p: t for p, t in SOURCES.items() if "runtime" in p.relative_to(LAMINAR).parts[:1]}
    missing = [
        p for p in _leaves(LaminarConfig)
        if p.startswith("model.") and p not in MODEL_FIELDS_THE_RUNTIME_NEEDS_NOT
        and not _read_in(p, runtime)
    ]  # fmt: skip
    assert not missing, f"model fields the runtime ignores: {missing}"
    leaves = set(_leaves(LaminarConfig))
    listed = {**MODEL_FIELDS_THE_RUNTIME_NEEDS_NOT, **MAPPED_BY_THE_CONFIG}
    stale = [p for p in listed if p not in leaves]
    assert not stale, f"listed here but no longer in the config: {stale}"
