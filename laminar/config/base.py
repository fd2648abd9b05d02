"""The base class of every config section.

Each field is documented by the docstring under it (unit and meaning) and carries a bound;
``tests/test_config.py`` walks the whole tree and fails on a field without either.
Unknown keys are errors, so a misspelled key never silently falls back to a default.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: strict keys, attribute docstrings become field descriptions."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        validate_assignment=True,
        frozen=False,
    )
