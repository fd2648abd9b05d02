"""``laminar plan``'s search arguments into a :class:`~laminar.plan.SearchSpace`.

Every flag is parsed cheaply first (lists split, at most :data:`MAX_VALUES` values each, YAML
values of ``--vary`` parsed), so the grid can be counted and a huge one refused before any
value is validated against the config (:func:`validate_space`, a full config validation per
value). Each grid axis is set by its flag (``--gpus``, ``--systems``, ...) or, without it, by a
``--set`` of its key (one value); with both, the flag's values and a warning. A ``--vary`` of a
grid key, or of one key twice, is refused: no value the user gave is dropped silently.
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any

from laminar.errors import ConfigError, LaminarWarning

MAX_VALUES = 10_000
"""Most values one list flag or ``--vary`` takes (the grid's bound stops far fewer)."""
MAX_VARY = 32
"""Most ``--vary`` keys (each multiplies the grid by at least one)."""


def space_from_args(args: argparse.Namespace, base):
    """The :class:`~laminar.plan.SearchSpace` the arguments describe (errors name the flag);
    values are not yet validated against the config (:func:`validate_space`)."""
    from laminar.plan import SearchSpace
    from laminar.plan.space import DEFAULT_FRACTIONS, DEFAULT_MAX_BATCHES, default_rollout_tps
    from laminar.sim.registry import all_systems

    sets = _set_keys(args.overrides)

    def axis(key, flag, parse, from_base, default):
        given = vars(args)[flag.removeprefix("--").replace("-", "_")]  # --max-batch: max_batch
        return _axis(sets, key, flag, given, parse, from_base, default)

    def numbers(flag, kind):
        return lambda text: _numbers(text, flag, kind)

    every = tuple(all_systems())
    systems = axis("sim.systems", "--systems", _system_names, tuple(base.sim.systems), every)
    fractions = axis("cluster.trainer_fraction", "--trainer-fractions",
                     numbers("--trainer-fractions", float), (base.cluster.trainer_fraction,),
                     DEFAULT_FRACTIONS)  # fmt: skip
    if any(not 0 < f < 1 for f in fractions):
        raise ConfigError("laminar plan", "--trainer-fractions", "each must be between 0 and 1")
    gpus = axis("cluster.gpus", "--gpus", numbers("--gpus", int), (base.cluster.gpus,),
                (base.cluster.gpus,))  # fmt: skip
    tps = axis("model.rollout_tp", "--tp", numbers("--tp", int), (base.model.rollout_tp,),
               default_rollout_tps(base))  # fmt: skip
    batches = axis("sim.max_batch", "--max-batch", numbers("--max-batch", int),
                   (base.sim.max_batch,), DEFAULT_MAX_BATCHES)  # fmt: skip
    repack = {"both": (True, False), "on": (True,), "off": (False,)}
    repacks = axis("repack.enabled", "--repack", repack.__getitem__, (base.repack.enabled,),
                   (True, False))  # fmt: skip
    layouts = _layouts_arg(args, sets)
    space = SearchSpace(
        trainer_layouts=layouts,
        gpus=gpus,
        systems=every if "all" in systems else systems,
        trainer_fractions=fractions,
        rollout_tps=tps,
        max_batches=batches,
        repack=repacks,
        extra=_vary_all(args.vary),
    )
    for flag, values in (("--gpus", space.gpus), ("--tp", space.rollout_tps),
                         ("--max-batch", space.max_batches)):  # fmt: skip
        if any(v < 1 for v in values):
            raise ConfigError("laminar plan", flag, "values must be positive")
    return space


def _layouts_arg(args: argparse.Namespace, sets: dict[str, str]) -> tuple[str, ...]:
    """``--trainer-layouts``: ``auto`` and/or ``TPxPPxEPxCP`` values (checked here); without
    it, ``auto``, which keeps the base config's layout (any ``--set trainer.tp=...``) and tries
    the others beside it."""
    from laminar.plan.space import DEFAULT_LAYOUTS, parse_layout

    given = getattr(args, "trainer_layouts", None)
    if given is None:
        return DEFAULT_LAYOUTS
    values = tuple(_split(given, "--trainer-layouts"))
    for v in values:
        if v.lower() != "auto":
            parse_layout(v)
    return values


def _axis(sets, key, flag, given, parse, from_base, default):
    """An axis from its flag; without the flag, the base config's value when a ``--set``
    named its key, else ``default``. The flag and such a ``--set`` both: the flag's values,
    with a warning that the ``--set`` one is not used."""
    named = _named(sets, key)
    if given is None:
        return from_base if named else default
    values = parse(given)
    if named and not set(from_base) <= set(values):
        warnings.warn(f"{named}: the plan varies {key} over {flag} {given:.200}; the --set "
                      "value is not used", LaminarWarning, stacklevel=3)  # fmt: skip
    return values


def _named(sets: dict[str, str], key: str) -> str:
    """The ``--set`` that names ``key`` or a section above it ('' if none)."""
    for k, text in sets.items():
        if key == k or key.startswith(k + "."):
            return text
    return ""


def _set_keys(overrides: list[str]) -> dict[str, str]:
    """Key of each ``--set KEY=VALUE`` -> its label for messages (already applied and valid)."""
    out = {}
    for text in overrides:
        key = text.partition("=")[0].strip()
        out[key] = f"--set {text[:200]}"
    return out


def _split(text: str, flag: str) -> list[str]:
    pieces = text.split(",")
    if len(pieces) > MAX_VALUES:
        raise ConfigError("laminar plan", flag, f"{len(pieces):,} values; at most {MAX_VALUES:,}")
    names = [s.strip() for s in pieces]
    if not any(names):
        raise ConfigError("laminar plan", flag, "expected a comma-separated list")
    if not all(names):  # "16,,32": a value left out by mistake, not a shorter list
        raise ConfigError("laminar plan", flag, f"an empty value in {text[:200]!r}")
    return list(dict.fromkeys(names))


def _system_names(text: str) -> tuple[str, ...]:
    return tuple(_split(text, "--systems"))


def _numbers(text: str, flag: str, kind) -> tuple:
    try:
        values = [kind(s) for s in _split(text, flag)]
    except (ValueError, OverflowError):
        what = "whole numbers" if kind is int else "numbers"
        msg = f"expected comma-separated {what}, got {text!r:.200}"
        raise ConfigError("laminar plan", flag, msg) from None
    return tuple(dict.fromkeys(values))


def _vary_all(texts: list[str]) -> dict[str, tuple]:
    if len(texts) > MAX_VARY:
        raise ConfigError("laminar plan", "--vary", f"{len(texts)} keys; at most {MAX_VARY}")
    out: dict[str, tuple] = {}
    for text in texts:
        key, values = _vary(text)
        if key in out:
            raise ConfigError(
                f"--vary {key}", "", f"given twice; list all its values in one --vary "
                f"{key}=V1,V2,... (a second one would replace the first)"
            )
        out[key] = values
    return out


def _vary(text: str) -> tuple[str, tuple]:
    """``KEY=V1,V2`` -> (KEY, distinct values parsed as YAML, in order)."""
    from laminar.config.loader import load_yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    label = f"--vary {text[:200]}"
    if not sep or not key or not raw.strip() or any(not p for p in key.split(".")):
        msg = "expected KEY=V1,V2,..., e.g. sim.kv_watermark=0.01,0.05"
        raise ConfigError(label, "", msg)
    values: dict[str, Any] = {}
    for piece in _pieces(raw, label):
        try:
            value = load_yaml(piece, label)
        except Exception as e:  # yaml.YAMLError: a tag, an alias, an unclosed bracket
            if not type(e).__module__.startswith("yaml"):
                raise
            raise ConfigError(label, key, f"cannot parse {piece.strip()!r:.60}: "
                              f"{str(e).splitlines()[0][:200]}") from None  # fmt: skip
        values.setdefault(json.dumps(value, sort_keys=True, default=repr), value)
    return key, tuple(values.values())


def _pieces(raw: str, label: str) -> list[str]:
    pieces = raw.split(",")
    if len(pieces) > MAX_VALUES:
        raise ConfigError(label[:60], "", f"{len(pieces):,} values; at most {MAX_VALUES:,}")
    if any(not p.strip() for p in pieces):
        raise ConfigError(label, "", "an empty value (two commas, or one at an end)")
    return pieces


def validate_space(space, base, args: argparse.Namespace) -> None:
    """Each value of each axis and ``--vary`` must validate on ``base`` together with some
    value of the axes it is checked against (a GPU count with the machine sizes ``--vary``
    gives, a varied value with the GPU counts): ConfigError naming the flag otherwise. Runs
    after the grid's bound, so it validates a bounded number of configs."""
    from laminar.plan.space import GPM_KEY

    gpms = [{GPM_KEY: v} for v in space.extra.get(GPM_KEY, ())] or [{}]
    for key, flag, text, values, contexts in (
        ("cluster.gpus", "--gpus", args.gpus, space.gpus, gpms),
        ("model.rollout_tp", "--tp", args.tp, space.rollout_tps, [{}]),
        ("sim.max_batch", "--max-batch", args.max_batch, space.max_batches, [{}]),
    ):
        source = f"{flag} {text:.200}" if text else flag
        for v in values:
            _validate(base, [{**c, key: v} for c in contexts], source)
    per_gpus = [{"cluster.gpus": g} for g in space.gpus]
    for key, values in space.extra.items():
        for v in values:
            _validate(base, [{**c, key: v} for c in per_gpus], f"--vary {key}")


def _validate(base, tries, source: str) -> None:
    """Raise the first ConfigError (naming ``source``) unless ``base`` with one of ``tries``
    (each a mapping of key -> value) validates."""
    from laminar.config.loader import apply_override, validate

    first = None
    for overrides in tries:
        data = base.model_dump(mode="json")
        try:
            for key, value in overrides.items():
                try:
                    apply_override(data, key.split("."), value, f"{key}={value}"[:200])
                except ConfigError as e:  # a key through a value ("seed.x"): name the flag
                    raise ConfigError(source, e.key_path, e.detail) from None
            validate(data, source, {})
            return
        except ConfigError as e:
            first = first or e
    if first is not None:
        raise first
