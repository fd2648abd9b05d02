"""YAML as YAML 1.2 reads it (the core schema), for configs and ``--set`` values.

PyYAML implements YAML 1.1, whose plain scalars surprise: ``yes``/``no``/``on``/``off`` are
booleans (``--set cluster.gpus=yes`` was 1 GPU), ``8:00`` is the base-60 integer 480, ``010``
is octal 8, and ``1e7`` is text. Under the 1.2 core schema only ``true``/``false`` are
booleans, ``null``/``~``/nothing is null, integers are decimal, ``0o`` octal or ``0x`` hex, and a
float may have an exponent without a dot; anything else is text, which a number field then
refuses by name. An integer of more than :data:`MAX_INT_DIGITS` digits is refused while it is
parsed (no setting is within orders of magnitude of it; Python refuses to convert 4,300 digits).
:class:`Dumper` quotes any text that either version would read as something else, so a
resolved ``config.yaml`` reads back identically under both.
"""

from __future__ import annotations

import re

import yaml

MAX_INT_DIGITS = 30
"""Most digits of an integer in a config (the largest bound of any setting has 13)."""

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_MERGE = re.compile(r"^(?:<<)$")

# (tag, pattern, first characters) in the order they are tried: an integer before a float.
_RESOLVERS = (
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", _BOOL, list("tTfF")),
    ("tag:yaml.org,2002:int", _INT, list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
    ("tag:yaml.org,2002:merge", _MERGE, ["<"]),
)


class Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 core schema's plain scalars (module docstring)."""

    yaml_implicit_resolvers: dict = {}  # noqa: RUF012 (PyYAML's class-level registry)


for _tag, _pattern, _first in _RESOLVERS:
    Loader.add_implicit_resolver(_tag, _pattern, _first)


def _line(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}"


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
    base = {"0o": 8, "0x": 16}.get(digits[:2].lower(), 10)
    digits = digits[2:] if base != 10 else digits
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(
            f"{_line(node)}: a whole number of {len(digits):,} digits is out of range for any "
            f"setting (at most {MAX_INT_DIGITS} digits)"
        )
    try:
        return sign * int(digits, base)
    except ValueError:
        raise ValueError(f"{_line(node)}: {text[:40]!r} is not a whole number") from None


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node))
    special = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}
    try:
        return float(special.get(text.lower(), text))
    except ValueError:
        raise ValueError(f"{_line(node)}: {text[:40]!r} is not a number") from None


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    text = str(loader.construct_scalar(node))
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{_line(node)}: {text[:40]!r} is not true or false")
    return text.lower() == "true"


Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


class Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that also quotes text YAML 1.2 would read as a number, boolean or
    null (``"1e7"``, ``"0o17"``), so its output reads back the same under 1.1 and 1.2."""


for _tag, _pattern, _first in _RESOLVERS:
    Dumper.add_implicit_resolver(_tag, _pattern, _first)
