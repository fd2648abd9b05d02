"""Load, override, validate and write configs.

A config comes from (later wins): the defaults in the tree, a preset shipped in
``laminar/presets/``, a YAML or TOML file, and ``--set a.b.c=value`` overrides. Errors name the
source (file, preset or ``--set``) and the key path, e.g. ``run.yaml: cluster.gpus: ...``.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from laminar.config.root import LaminarConfig
from laminar.config.yaml12 import MAX_INT_DIGITS, Dumper, Loader
from laminar.errors import ConfigError
from laminar.inputfile import InputFileError, leaves, read_text

RESOLVED_NAME = "config.yaml"

MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read (bytes); configs are a few kilobytes."""

MAX_YAML_NODES = 100_000
"""Most values a YAML document may expand to (aliases counted at every use): refuses alias
bombs ("billion laughs"), which a few lines expand to gigabytes."""

MAX_YAML_DEPTH = 64
"""Deepest nesting of a YAML document (the config tree is a few levels deep)."""


def list_presets() -> list[str]:
    """Names of the presets shipped with the package."""
    root = resources.files("laminar") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load`` with YAML 1.2's plain scalars (``laminar.config.yaml12``: ``yes`` is
    text, not true) that refuses duplicate keys, alias bombs, runaway nesting and integers of
    more digits than any setting, with :class:`ConfigError` naming ``source`` and the line."""
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, source)
        return loader.construct_document(node)
    except (ValueError, OverflowError) as e:  # a value YAML cannot build (2023-13-45, 10**5000)
        raise ConfigError(source, "", f"cannot parse a value: {_clip(str(e), 200)}") from None
    except RecursionError:
        raise ConfigError(source, "", f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Walk the node graph once: duplicate keys, depth, and the size it expands to."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_:
            raise ConfigError(source, "", f"line {node.start_mark.line + 1}: recursive alias")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(
                source, "", f"line {node.start_mark.line + 1}: nested deeper than "
                f"{MAX_YAML_DEPTH} levels"
            )
        open_.add(id(node))
        total = 1
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, source)
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_YAML_NODES:
                raise ConfigError(
                    source, "", f"expands to more than {MAX_YAML_NODES:,} values (aliases "
                    "repeated inside aliases?); refused"
                )
        open_.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root, 0)


def _check_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        ident = (key.tag, key.value)
        if ident in seen:
            shown = key.value if len(key.value) <= 64 else key.value[:61] + "..."
            raise ConfigError(
                source, "", f"line {line}: duplicate key {shown!r} (first on line "
                f"{seen[ident]}); each key may appear once"
            )
        seen[ident] = line


def _read_mapping(text: str, source: str, suffix: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text) if suffix == ".toml" else load_yaml(text, source)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(source, "", f"cannot parse: {_clip(str(e), 400)}") from None
    except RecursionError:
        raise ConfigError(source, "", "nested too deeply") from None
    except ValueError as e:  # TOML: an integer past Python's 4,300-digit conversion limit
        detail = f"cannot parse a value: {_clip(str(e), 200)}"
        if "integer string conversion" in str(e):
            detail = (f"holds a whole number of more than 4,300 digits; no setting takes more "
                      f"than {MAX_INT_DIGITS} digits")  # fmt: skip
        raise ConfigError(source, "", detail) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"top level must be a mapping, got {type(data).__name__}")
    check_whole_numbers(data, source)
    return data


def check_whole_numbers(data: Any, source: str, prefix: str = "") -> None:
    """Refuse an integer of more than ``MAX_INT_DIGITS`` digits anywhere in ``data``
    (TOML reads them; no setting is within orders of magnitude of one), naming its key."""
    limit = 10**MAX_INT_DIGITS
    for value, key in leaves(data, prefix):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= limit:
            raise ConfigError(
                source, _clip(key, 120), f"a whole number of {len(str(abs(value))):,} digits "
                f"is out of range for any setting (at most {MAX_INT_DIGITS} digits)"
            )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML (.yaml/.yml) or TOML (.toml) config file."""
    p = Path(path)
    if "\x00" in str(p):
        raise ConfigError(repr(str(p)), "", "a path cannot hold a NUL character")
    if p.suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(str(p), "", "config files must end in .yaml, .yml or .toml")
    try:
        text = read_text(p, kind="config file", max_bytes=MAX_CONFIG_BYTES)
    except InputFileError as e:
        raise ConfigError(str(p), "", e.detail) from None
    return _read_mapping(text, str(p), p.suffix)


def read_preset(name: str) -> dict[str, Any]:
    """The raw mapping of a shipped preset."""
    names = list_presets()
    if name not in names:
        raise ConfigError(f"preset {name!r}", "", f"unknown preset; available: {', '.join(names)}")
    text = (resources.files("laminar") / "presets" / f"{name}.yaml").read_text()
    return _read_mapping(text, f"preset {name!r}", ".yaml")


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``top`` over ``base`` (mappings merge, anything else is replaced). A mapping
    of another ``type`` (a union's other variant: a preset's ``repeat`` task under a file's
    ``python`` one) replaces the one below instead: the two share no keys."""
    out = dict(base)
    for k, v in top.items():
        other = isinstance(v, dict) and isinstance(out.get(k), dict)
        if other and "type" in v and "type" in out[k] and v["type"] != out[k]["type"]:
            out[k] = v
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], value); the value is parsed as YAML (3, true, [a])."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(_set_label(text), "", "expected KEY.PATH=VALUE, e.g. cluster.gpus=64")
    try:
        value = load_yaml(raw, _set_label(text)) if raw.strip() else ""
    except yaml.YAMLError as e:
        why = getattr(e, "problem", None) or (str(e).splitlines() or ["not YAML"])[0]
        detail = f"cannot parse value {_clip(raw, 80)!r} as YAML: {_clip(why, 200)}"
        raise ConfigError(_set_label(text), key, detail) from None
    return key.split("."), value


def apply_override(data: dict[str, Any], path: list[str], value: Any, text: str) -> None:
    """Set ``data[a][b][c] = value``, creating mappings on the way."""
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(_set_label(text), ".".join(path[: i + 1]), "is not a section")
        node = child
    node[path[-1]] = value


def _without_tags(loc: Sequence[Any]) -> list[Any]:
    """``loc`` without the tags pydantic puts after a union field: a section's variant
    (``workload.source.synthetic.params`` -> ``workload.source.params``) or a plain type's
    (``sim.warmup_steps.constrained-int`` -> ``sim.warmup_steps``)."""
    out: list[Any] = []
    node: Any = LaminarConfig
    for part in loc:
        variants = _variants(node)
        if variants is not None and part in variants:
            node = variants[part]
            continue
        if _is_union(node) and isinstance(part, str):
            node = None  # a member's tag; the member itself is not needed below
            continue
        out.append(part)
        node = _child(node, part)
    return out


def _child(node: Any, part: Any) -> Any:
    """The annotation one step below ``node`` (a section, list or mapping), else None."""
    while typing.get_origin(node) is typing.Annotated:
        node = typing.get_args(node)[0]
    args = typing.get_args(node)
    if isinstance(part, int):
        return args[0] if typing.get_origin(node) is list and args else None
    if typing.get_origin(node) is dict and len(args) == 2:
        return args[1]
    if isinstance(node, type) and issubclass(node, BaseModel) and part in node.model_fields:
        return node.model_fields[part].annotation
    return None


def _is_union(node: Any) -> bool:
    while typing.get_origin(node) is typing.Annotated:
        node = typing.get_args(node)[0]
    return typing.get_origin(node) in (typing.Union, types.UnionType)


def _variants(node: Any) -> dict[str, type[BaseModel]] | None:
    """Tag -> section of a union of sections with a ``type`` tag; None for anything else."""
    while typing.get_origin(node) is typing.Annotated:
        node = typing.get_args(node)[0]
    union = typing.get_origin(node) in (typing.Union, types.UnionType)
    members = typing.get_args(node) if union else ()
    out = {}
    for m in members:
        if isinstance(m, type) and issubclass(m, BaseModel) and "type" in m.model_fields:
            out[m.model_fields["type"].default] = m
    return out or None


def _loc_to_path(loc: Sequence[Any]) -> str:
    out = ""
    for part in _without_tags(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _known_keys(loc: Sequence[Any]) -> list[str] | None:
    """Field names of the section at ``loc`` (for 'did you mean'), when it is a plain section."""
    model: type[BaseModel] = LaminarConfig
    for part in _without_tags(loc):
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
    shown = "" if isinstance(got, dict) else f" (got {_clip(repr(got), 80)})"
    return f"{_clip(err['msg'], 300)}{shown}"


def _set_label(text: str) -> str:
    """How errors name the ``--set`` override ``text``."""
    return f"--set {_clip(text, 120)}"


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (user input echoed in errors stays readable)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _grouped(errors: list[dict[str, Any]]) -> list[str]:
    """One line per key: the union members' complaints about one value joined by "or"
    (``Input should be a valid integer or Input should be 'auto' (got True)``), the first
    key's line without its key (the error's key path names it), at most 8 keys."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for err in errors:
        by_key.setdefault(_clip(_loc_to_path(err["loc"]), 120), []).append(err)
    lines = []
    for i, (key, errs) in enumerate(list(by_key.items())[:8]):
        msgs = list(dict.fromkeys(_clip(x["msg"].removeprefix("Value error, "), 300) for x in errs))
        head = "Input should be "
        if len(msgs) > 1 and all(m.startswith(head) for m in msgs):
            msgs = [head + " or ".join(m.removeprefix(head) for m in msgs)]
        line = _describe({**errs[0], "msg": " or ".join(msgs)})
        lines.append(line if i == 0 else f"{key}: {line}")
    if len(by_key) > 8:
        lines.append(f"... and {len(by_key) - 8} more")
    return lines


def validate(data: dict[str, Any], source: str, overrides: dict[str, str]) -> LaminarConfig:
    """Validate a raw mapping; errors name ``source`` or the ``--set`` that caused them."""
    try:
        return LaminarConfig.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        first = errors[0]
        key_path = _clip(_loc_to_path(first["loc"]), 120)
        origin = source
        for key, text in overrides.items():
            inside = key_path.startswith((key + ".", key + "["))
            named = not key_path and key in str(first["msg"])  # a check across sections
            if key_path == key or inside or named or key.startswith(key_path + "."):
                origin = _set_label(text)
        lines = _grouped(errors)
        raise ConfigError(origin, key_path, "\n  ".join(lines)) from None


def load_config(
    path: str | Path | None = None,
    *,
    preset: str | None = None,
    overrides: Sequence[str] = (),
) -> LaminarConfig:
    """Defaults <- preset <- file <- overrides, validated into a :class:`LaminarConfig`."""
    data, source, seen = _merged(path, preset, overrides)
    return validate(data, source, seen)


def explicit_keys(
    path: str | Path | None = None, *, overrides: Sequence[str] = ()
) -> set[str]:
    """Dotted key paths a config file or ``--set`` overrides set explicitly (a preset's and
    the defaults' values are not counted), e.g. ``{"workload.max_prompt_len"}``."""
    data, _, _ = _merged(path, None, overrides)
    out: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}{k}"
            out.add(key)
            if isinstance(v, dict):
                walk(v, key + ".")

    walk(data, "")
    return out


def _merged(
    path: str | Path | None, preset: str | None, overrides: Sequence[str]
) -> tuple[dict[str, Any], str, dict[str, str]]:
    """The raw mapping, its source's name, and the ``--set`` texts by dotted key."""
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
    if path is not None:
        _python_task_dir(data, Path(path))
    return data, source, seen


def _python_task_dir(data: dict[str, Any], path: Path) -> None:
    """A ``runtime.task`` of type ``python`` (or a ``jsonl`` one with a ``reward`` function)
    read with a config file imports its module from
    the file's directory unless ``module_dir`` says otherwise (recorded, so a resumed run
    imports the same module)."""
    task = data.get("runtime", {}).get("task") if isinstance(data.get("runtime"), dict) else None
    imports = isinstance(task, dict) and (task.get("type") == "python" or task.get("reward"))
    if imports and "module_dir" not in task:
        task["module_dir"] = str(path.expanduser().resolve().parent)


def dump_config(config: LaminarConfig) -> str:
    """The fully resolved config as YAML (every field, defaults included)."""
    return yaml.dump(config.model_dump(mode="json"), Dumper=Dumper, sort_keys=False)


def write_resolved(config: LaminarConfig, run_dir: str | Path) -> Path:
    """Write the resolved config next to a run, as ``config.yaml``; it loads back identically."""
    out = Path(run_dir) / RESOLVED_NAME
    out.write_text(dump_config(config))
    return out
