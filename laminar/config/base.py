"""The base class of every config section.

Each field is documented by the docstring under it (unit and meaning) and carries a bound;
``tests/test_config.py`` walks the whole tree and fails on a field without either.
Unknown keys are errors, so a misspelled key never silently falls back to a default.
A number is finite (``allow_inf_nan``: no ``NaN``, no infinity) and never a boolean: pydantic
would read ``true`` as 1, so a boolean given where a number is meant is handed on as the text
it was written as (``"true"``), which the field then refuses by name. The YAML reader gives
plain scalars their YAML 1.2 types (``laminar.config.yaml12``: ``yes``/``on`` are text, not
true), so ``cluster.gpus: yes`` is refused the same way.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class Section(BaseModel):
    """A config section: strict keys, finite numbers that are never booleans, attribute
    docstrings become field descriptions."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=True,
        frozen=False,
        allow_inf_nan=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is not None:
                out[name] = _booleans_as_text(field.annotation, value)
        return out


def _booleans_as_text(annotation: Any, value: Any) -> Any:
    """``value`` with every boolean that stands where ``annotation`` takes a number and no
    boolean (at the top, as a list's item or a mapping's value) turned into its text."""
    ann = _unwrap(annotation)
    if isinstance(value, bool):
        return str(value).lower() if _number_not_bool(ann) else value
    args = typing.get_args(ann)
    if isinstance(value, list) and typing.get_origin(ann) is list and args:
        return [_booleans_as_text(args[0], v) for v in value]
    if isinstance(value, dict) and typing.get_origin(ann) is dict and len(args) == 2:
        return {k: _booleans_as_text(args[1], v) for k, v in value.items()}
    return value


def _number_not_bool(annotation: Any) -> bool:
    """Whether ``annotation`` takes an int or a float and not a bool."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = {_unwrap(a) for a in typing.get_args(annotation)}
    else:
        members = {annotation}
    return bool({int, float} & members) and bool not in members


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation
