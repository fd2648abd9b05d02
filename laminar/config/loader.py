"""Load, override, validate and write configs.

A config comes from (later wins): the defaults in the tree, a preset shipped in
``laminar/presets/``, a YAML or TOML file, and ``--set a.b.c=value`` overrides. Errors name the
source (file, preset or ``--set``) and the key path, e.g. ``run.yaml: cluster.gpus: ...``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from laminar.config.root import LaminarConfig
from laminar.errors import ConfigError

RESOLVED_NAME = "config.yaml"


def list_presets() -> list[str]:
    """Names of the presets shipped with the package."""
    root = resources.files("laminar") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def _read_mapping(text: str, source: str, suffix: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text) if suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(source, "", f"cannot parse: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"top level must be a mapping, got {type(data).__name__}")
    return data


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML (.yaml/.yml) or TOML (.toml) config file."""
    p = Path(path)
    if p.suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(str(p), "", "config files must end in .yaml, .yml or .toml")
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(str(p), "", f"cannot read: {e.strerror}") from None
    return _read_mapping(text, str(p), p.suffix)


def read_preset(name: str) -> dict[str, Any]:
    """The raw mapping of a shipped preset."""
    names = list_presets()
    if name not in names:
        raise ConfigError(f"preset {name!r}", "", f"unknown preset; available: {', '.join(names)}")
    text = (resources.files("laminar") / "presets" / f"{name}.yaml").read_text()
    return _read_mapping(text, f"preset {name!r}", ".yaml")


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``top`` over ``base`` (mappings merge, anything else is replaced)."""
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], value); the value is parsed as YAML (3, true, [a])."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text}", "", "expected KEY.PATH=VALUE, e.g. cluster.gpus=64")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {text}", key, f"cannot parse value: {e}") from None
    return key.split("."), value


def apply_override(data: dict[str, Any], path: list[str], value: Any, text: str) -> None:
    """Set ``data[a][b][c] = value``, creating mappings on the way."""
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {text}", ".".join(path[: i + 1]), "is not a section")
        node = child
    node[path[-1]] = value


def _loc_to_path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _known_keys(loc: Sequence[Any]) -> list[str] | None:
    """Field names of the section at ``loc`` (for 'did you mean'), when it is a plain section."""
    model: type[BaseModel] = LaminarConfig
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return sorted(model.model_fields)


def _describe(err: dict[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        known = _known_keys(err["loc"][:-1])
        hint = f" (expected one of: {', '.join(known)})" if known else ""
        return f"unknown key{hint}"
    got = err.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{err['msg']}{shown}"


def validate(data: dict[str, Any], source: str, overrides: dict[str, str]) -> LaminarConfig:
    """Validate a raw mapping; errors name ``source`` or the ``--set`` that caused them."""
    try:
        return LaminarConfig.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        first = errors[0]
        key_path = _loc_to_path(first["loc"])
        origin = source
        for key, text in overrides.items():
            if key_path == key or key_path.startswith(key + ".") or key.startswith(key_path + "."):
                origin = f"--set {text}"
        lines = [_describe(first)]
        lines += [f"{_loc_to_path(x['loc'])}: {_describe(x)}" for x in errors[1:]]
        raise ConfigError(origin, key_path, "\n  ".join(lines)) from None


def load_config(
    path: str | Path | None = None,
    *,
    preset: str | None = None,
    overrides: Sequence[str] = (),
) -> LaminarConfig:
    """Defaults <- preset <- file <- overrides, validated into a :class:`LaminarConfig`."""
    data: dict[str, Any] = {}
    source = "defaults"
    if preset is not None:
        data = merge(data, read_preset(preset))
        source = f"preset {preset!r}"
    if path is not None:
        data = merge(data, read_config_file(path))
        source = str(path)
    seen: dict[str, str] = {}
    for text in overrides:
        keys, value = parse_override(text)
        apply_override(data, keys, value, text)
        seen[".".join(keys)] = text
    return validate(data, source, seen)


def dump_config(config: LaminarConfig) -> str:
    """The fully resolved config as YAML (every field, defaults included)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def write_resolved(config: LaminarConfig, run_dir: str | Path) -> Path:
    """Write the resolved config next to a run, as ``config.yaml``; it loads back identically."""
    out = Path(run_dir) / RESOLVED_NAME
    out.write_text(dump_config(config))
    return out
