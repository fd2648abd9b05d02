"""A rule-based math verifier: the final answer of a response against the reference answer.

The final answer is the content of the last ``\\boxed{...}`` (braces balanced), else the last
number in the text. Both sides are normalised before comparison: surrounding ``$``, spaces,
a trailing period, ``\\text{}``/``\\left``/``\\right`` wrappers and thousands separators go;
numbers compare by value (``0.50`` = ``1/2`` = ``.5``), anything else as normalised text.
Every pattern here is linear in the text (no nested quantifiers), and the rollout runs it off
its event loop with a timeout anyway.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_TEXT_WRAP = re.compile(r"\\(?:text|mathrm|textbf|mbox)\{([^{}]*)\}")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces."""
    at = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if at < 0:
        return None
    i = text.index("{", at) + 1
    depth, start = 1, i
    while i < len(text):
        c = text[i]
        depth += (c == "{") - (c == "}")
        if depth == 0:
            return text[start:i]
        i += 1
    return None  # unbalanced: no final answer


def final_answer(text: str) -> str | None:
    """The response's final answer: the last boxed content, else the last number."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def normalise(answer: str) -> str:
    """Canonical text of an answer (module doc)."""
    s = _TEXT_WRAP.sub(r"\1", answer.strip())
    for token in ("\\left", "\\right", "\\!", "\\,", "\\;", "$", " "):
        s = s.replace(token, "")
    s = s.rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    m = re.fullmatch(r"\\[dt]?frac\{(-?\d+)\}\{(\d+)\}", s)
    if m:
        s = f"{m.group(1)}/{m.group(2)}"
    return s


def _value(s: str) -> Fraction | None:
    try:
        return Fraction(s) if re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)(/\d+)?", s) else None
    except (ValueError, ZeroDivisionError):
        return None


def is_correct(response: str, reference: str) -> bool:
    """True when the response's final answer equals ``reference`` (normalised)."""
    got = final_answer(response)
    if got is None:
        return False
    a, b = normalise(got), normalise(reference)
    va, vb = _value(a), _value(b)
    if va is not None and vb is not None:
        return va == vb
    return a == b
