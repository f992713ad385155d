"""calculator: arithmetic through the ast module; hostile and oversized input is refused."""

from __future__ import annotations

import math
import re

import pytest

from piagent import AbortController
from piagent.tools import calculator
from piagent.tools.calculator import MAX_EXPONENT, CalculatorError, evaluate


def calc(expression: str) -> str:
    result = calculator().execute("c", {"expression": expression}, AbortController().signal, lambda p: None)
    return result.content[0].text


@pytest.mark.parametrize(
    "expression, value",
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("-3 + +2", -1),
        ("2 ** -1", 0.5),
        ("1.5e3", 1500.0),
        ("sqrt(16)", 4.0),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("round(2.567, 2)", 2.57),
        ("floor(-2.5) + ceil(2.1)", 0),
        ("abs(-4)", 4),
        ("log(e)", 1.0),
        ("atan2(1, 1) * 4", math.pi),
    ],
)
def test_valid_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == pytest.approx(value)


def test_results_are_text_for_the_model() -> None:
    assert calc("6 * 7") == "42"
    assert calc("1 / 4") == "0.25"
    assert calc("2 ** 100") == str(2**100)


@pytest.mark.parametrize(
    "expression, message",
    [
        ("__import__('os')", "only these functions are allowed"),
        ("__import__('os').system('true')", "only these functions are allowed"),
        ("open('/etc/passwd')", "only these functions are allowed"),
        ("(1).__class__", "Attribute expressions are not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers are allowed"),
        ("True + 1", "only numbers are allowed"),
        ("[1, 2]", "List expressions are not allowed"),
        ("[x for x in (1,)]", "ListComp expressions are not allowed"),
        ("lambda: 1", "Lambda expressions are not allowed"),
        ("1 if 1 else 2", "IfExp expressions are not allowed"),
        ("1 < 2", "Compare expressions are not allowed"),
        ("1 << 2", "operator LShift is not allowed"),
        ("~1", "operator Invert is not allowed"),
        ("sqrt(x=4)", "keyword arguments are not allowed"),
        ("1 +", "invalid expression"),
        ("import os", "invalid expression"),
        ("1 / 0", "division by zero"),
        ("log(-1)", "math error: math domain error"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_hostile_or_invalid_input_is_refused_clearly(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError, match=re.escape(message)):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["9 ** 9 ** 9", "10 ** 100000", "2 ** (10 ** 6)", f"2 ** {MAX_EXPONENT + 1}"])
def test_huge_exponents_are_refused_before_computing(expression: str) -> None:
    with pytest.raises(CalculatorError, match="too large"):
        evaluate(expression)


def test_repeated_squaring_cannot_build_a_huge_integer() -> None:
    with pytest.raises(CalculatorError, match="too large"):
        evaluate("((2 ** 5000) ** 2) ** 2")
    with pytest.raises(CalculatorError, match="too large"):
        evaluate(" * ".join(["(2 ** 4000)"] * 4))


def test_float_overflow_is_refused() -> None:
    with pytest.raises(CalculatorError, match="too large"):
        evaluate("10.0 ** 400")
    with pytest.raises(CalculatorError, match="too large"):
        evaluate("exp(1000)")


def test_overlong_and_deeply_nested_input_is_refused() -> None:
    with pytest.raises(CalculatorError, match="too long"):
        evaluate("1+" * 1000 + "1")
    with pytest.raises(CalculatorError):
        evaluate("(" * 400 + "1" + ")" * 400)


def test_errors_reach_the_model_as_error_results() -> None:
    with pytest.raises(CalculatorError):
        calc("__import__('os')")
