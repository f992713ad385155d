"""piagent.ai.nesting.loads reads JSON exactly as json.loads does (same values, same errors),
refusing values nested deeper than its bound with a clear error."""

from __future__ import annotations

import json

import pytest

from piagent.ai.nesting import loads, loads_each
from piagent.exceptions import InvalidValueError

TEXTS = [
    '{"type": "message_update", "delta": "a\\nb \\u00e9"}',
    "[1, 2.5, null, true]",
    '"just a string"',
    "12",
    '  {"padded": 1}  ',
    '{"a": 1}\n',
    "\ufeff{}",
    '{"a": 1} {"b": 2}',
    '{"a": 1',
    "not json",
    "",
    "[" * 150 + "]" * 150,
]


@pytest.mark.parametrize("text", TEXTS)
def test_loads_returns_what_json_loads_returns_and_raises_what_it_raises(text: str) -> None:
    try:
        expected = json.loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError) as caught:
            loads(text, "a value", 200)
        assert type(caught.value) is type(exc) and str(caught.value) == str(exc)
    else:
        assert loads(text, "a value", 200) == expected
        assert loads(text.encode(), "a value", 200) == expected  # bytes too


def test_loads_each_gives_what_loads_gives_for_each_text_and_its_error_in_its_place() -> None:
    texts = [*TEXTS, "[" * 201 + "]" * 201, "[" * 5000 + "]" * 5000, '{"deep": ' * 150 + "1" + "}" * 150]
    values = loads_each(texts, "an event", 200)
    assert len(values) == len(texts)
    for text, value in zip(texts, values):
        try:
            expected = loads(text, "an event", 200)
        except ValueError as exc:
            assert type(value) is type(exc) and str(value) == str(exc), text[:20]
        else:
            assert value == expected, text[:20]


def test_loads_refuses_a_value_nested_deeper_than_its_bound() -> None:
    with pytest.raises(InvalidValueError, match="an event is nested deeper than 200 levels"):
        loads("[" * 201 + "]" * 201, "an event", 200)
    with pytest.raises(InvalidValueError, match="nested deeper than 200 levels"):
        loads("[" * 5000 + "]" * 5000, "an event", 200)  # json's own recursion limit
