"""``calculator``: safe arithmetic, evaluated by walking the ``ast`` (no ``eval``).

Allowed: int and float literals, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the
constants ``pi e tau`` and the functions ``sqrt exp log log2 log10 sin cos tan asin acos
atan atan2 degrees radians hypot floor ceil abs round min max``. Anything else (names,
attributes, strings, comprehensions, calls to other functions) is refused with a clear
error, as are results that would grow too large (exponents beyond ``MAX_EXPONENT``,
integers longer than ``MAX_INT_BITS`` bits) and arguments that would make a function run for
long (``round``'s digits beyond ``MAX_ROUND_DIGITS``): the evaluation holds the GIL, so no
abort or timeout could end it.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Annotated, Any, Callable, Union

from ..decorator import tool
from ..exceptions import InvalidValueError
from ..types import AgentTool

__all__ = ["MAX_EXPONENT", "MAX_INT_BITS", "MAX_ROUND_DIGITS", "calculator", "evaluate"]

Number = Union[int, float]

MAX_EXPRESSION_LENGTH = 1000
MAX_EXPONENT = 10_000
MAX_INT_BITS = 10_000
MAX_ROUND_DIGITS = 4_000  # round(x, n): |n| at most this (10**n is computed)

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(math, name)
    for name in [
        "sqrt",
        "exp",
        "log",
        "log2",
        "log10",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "degrees",
        "radians",
        "hypot",
        "floor",
        "ceil",
    ]
}
_FUNCTIONS.update({"abs": abs, "round": round, "min": min, "max": max})


class CalculatorError(InvalidValueError):
    """An expression the calculator refuses or cannot evaluate."""


def evaluate(expression: str) -> Number:
    """The value of an arithmetic ``expression``; CalculatorError says what is wrong."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculatorError(f"expression is too long (at most {MAX_EXPRESSION_LENGTH} characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"invalid expression: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise CalculatorError("invalid expression: too deeply nested") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result is too large") from None
    except RecursionError:
        raise CalculatorError("expression is too deeply nested") from None
    except (ValueError, TypeError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(f"math error: {exc}") from None


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, not {value!r}")
        return value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        op = _BINARY.get(type(node.op))
        if op is None:
            raise CalculatorError(f"operator {type(node.op).__name__} is not allowed")
        return _checked(op(left, right))
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise CalculatorError(f"operator {type(node.op).__name__} is not allowed")
        return unary(_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; constants: {', '.join(_CONSTANTS)}")
    if isinstance(node, ast.Call):
        return _call(node)
    raise CalculatorError(
        f"{type(node).__name__} expressions are not allowed; use numbers, operators and math functions"
    )


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        allowed = ", ".join(sorted(_FUNCTIONS))
        raise CalculatorError(f"only these functions are allowed: {allowed}")
    if node.keywords:
        raise CalculatorError("keyword arguments are not allowed")
    args = [_checked(_eval(arg)) for arg in node.args]
    if node.func.id == "round" and len(args) == 2 and isinstance(args[1], int) and abs(args[1]) > MAX_ROUND_DIGITS:
        raise CalculatorError(f"round() to {args[1]} digits is not allowed (at most {MAX_ROUND_DIGITS} either way)")
    return _checked(_FUNCTIONS[node.func.id](*args))


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent!r} is too large (at most {MAX_EXPONENT})")
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and base.bit_length() * exponent > MAX_INT_BITS
    ):
        raise CalculatorError("result is too large")
    result = base**exponent
    if isinstance(result, complex):
        raise CalculatorError("result is not a real number")
    return result


def _checked(value: Any) -> Number:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError("result is too large")
    if isinstance(value, float) and math.isnan(value):
        raise CalculatorError("result is not a number")
    return value


def calculator() -> AgentTool:
    """A ``calculator`` tool: evaluates an arithmetic expression safely and returns the number."""

    @tool(name="calculator", replay="safe")
    def calculate(
        expression: Annotated[str, "An arithmetic expression, e.g. '2 * (3 + 4) ** 2' or 'sqrt(2) / 2'."],
    ) -> str:
        """Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses, pi, e and math functions."""
        return _format(evaluate(expression))

    return calculate


def _format(value: Number) -> str:
    return repr(value) if isinstance(value, float) else str(value)
