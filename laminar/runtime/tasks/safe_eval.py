"""Arithmetic expressions evaluated safely: parsed with :mod:`ast` and walked over a closed set of
nodes (numbers, + - * / // % **, unary signs, parentheses, a few math functions and constants);
nothing is ``eval``-ed, no name or attribute outside that set resolves, and sizes are bounded
(the text, the digits of every intermediate integer, a power's result, a factorial's argument),
so an expression cannot run code, read anything or take long.
"""

from __future__ import annotations

import ast
import math
import operator

MAX_CHARS = 256  # expression text
MAX_BITS = 4096  # any intermediate integer (~1233 digits)
MAX_FACTORIAL = 300
MAX_NODES = 200


class CalcError(ValueError):
    """The expression is not one the calculator evaluates (the message says why)."""


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _factorial(n: float) -> int:
    if n != int(n) or n < 0 or n > MAX_FACTORIAL:
        raise CalcError(f"factorial takes a whole number 0..{MAX_FACTORIAL}")
    return math.factorial(int(n))


_FUNCTIONS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil,
    "log": math.log, "ln": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "min": min, "max": max,
    "factorial": _factorial, "gcd": math.gcd, "lcm": math.lcm,
}  # fmt: skip


def _check(x: float | int) -> float | int:
    if isinstance(x, int) and x.bit_length() > MAX_BITS:
        raise CalcError("the number is too large")
    if isinstance(x, float) and not math.isfinite(x):
        raise CalcError("the result is not a finite number")
    return x


def _power(base: float | int, exp: float | int) -> float | int:
    whole = isinstance(base, int) and isinstance(exp, int)
    if whole and exp > 0 and abs(base) > 1 and exp * math.log2(abs(base)) > MAX_BITS:
        raise CalcError("the power is too large")
    try:
        out = base**exp
    except (OverflowError, ZeroDivisionError) as e:
        raise CalcError(str(e)) from None
    if isinstance(out, complex):
        raise CalcError("the result is a complex number")
    return out


def _binary(node: ast.BinOp) -> float | int:
    left, right = _eval(node.left), _eval(node.right)
    if isinstance(node.op, ast.Pow):
        return _check(_power(left, right))
    op = _BINARY.get(type(node.op))
    if op is None:
        raise CalcError(f"the operator {type(node.op).__name__} is not supported")
    try:
        return _check(op(left, right))
    except ZeroDivisionError:
        raise CalcError("division by zero") from None


def _call(node: ast.Call) -> float | int:
    name = node.func.id  # type: ignore[attr-defined]  (checked by the caller)
    fn = _FUNCTIONS.get(name)
    if fn is None:
        raise CalcError(f"unknown function {name!r}")
    args = [_eval(a) for a in node.args]
    try:
        return _check(fn(*args))
    except CalcError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        raise CalcError(f"{name}: {e}") from None


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _call(node)
    raise CalcError(f"{type(node).__name__} is not allowed in an expression")


def evaluate(expression: str) -> float | int:
    """The value of an arithmetic ``expression`` (``^`` is a power, ``×``/``÷`` multiply and
    divide); a :class:`CalcError` for anything else."""
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise CalcError("empty expression")
    if len(text) > MAX_CHARS:
        raise CalcError(f"the expression is longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as e:
        raise CalcError(f"not an expression ({getattr(e, 'msg', e)})") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalcError("the expression is too long")
    return _eval(tree)


def show(value: float | int) -> str:
    """A value as the calculator writes it: whole numbers without a decimal point, others to
    12 significant digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)
