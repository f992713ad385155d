"""Bounds on a tool call's arguments, checked before anything walks them recursively.

A model's arguments end up in the transcript, in every later request body, in validation and
in the tool. :func:`argument_problem` finds what would break one of those (see
docs/providers.md#limits):

* nesting deeper than :data:`MAX_ARGUMENT_DEPTH` levels (recursion in ``json.dumps``,
  ``copy.deepcopy`` and the validator would fail on every later request);
* more than :data:`MAX_ARGUMENT_CHARS` characters of JSON (validation time and memory grow
  with it);
* a number that is not finite (``1e999999`` reads as ``inf``, which JSON cannot carry) or an
  integer of more than :data:`MAX_INTEGER_DIGITS` digits (Python refuses to read one of more
  than 4,300, which used to turn all the arguments into ``{}`` silently).

The message builder gives a call with such arguments ``{}`` as its arguments and records the
problem (:class:`RejectedToolCall`); the executors answer it with an error result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from .types import ToolCall

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_INTEGER_DIGITS",
    "OverlongInteger",
    "RejectedToolCall",
    "argument_problem",
]

MAX_ARGUMENT_DEPTH = 100
MAX_ARGUMENT_CHARS = 1_000_000
MAX_INTEGER_DIGITS = 1000
_INTEGER_LIMIT = 10**MAX_INTEGER_DIGITS
"""The smallest integer with more than :data:`MAX_INTEGER_DIGITS` digits, computed once."""
_INTEGER_LIMIT_BITS = _INTEGER_LIMIT.bit_length()


class OverlongInteger(str):
    """The digits of a JSON integer too long to read as ``int`` (kept as text, so the partial
    arguments shown while streaming still serialise; :func:`argument_problem` reports it)."""


def read_integer(text: str) -> Any:
    """``int(text)``, or :class:`OverlongInteger` past :data:`MAX_INTEGER_DIGITS` digits."""
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        return OverlongInteger(text)
    return int(text)


@dataclass
class RejectedToolCall(ToolCall):
    """A tool call whose arguments broke a bound: ``arguments`` is ``{}`` and ``problem`` says why.

    It is a :class:`ToolCall` in the transcript (serialised like any other), and never executed.
    """

    problem: str = ""


def argument_problem(value: Any) -> Optional[str]:
    """What makes ``value`` unsafe as tool arguments, or None. Iterative: any depth is safe to check."""
    chars = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        chars += 2
        if isinstance(item, dict):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            for key, inner in item.items():
                chars += len(key) + 4 if isinstance(key, str) else 8
                stack.append((inner, depth + 1))
        elif isinstance(item, (list, tuple)):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, OverlongInteger):
            return f"contain an integer of {len(item.lstrip('-')):,} digits (at most {MAX_INTEGER_DIGITS:,})"
        elif isinstance(item, str):
            chars += len(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return f"contain a number that is not finite ({item!r}), which JSON cannot represent"
        elif isinstance(item, int) and not isinstance(item, bool):
            # Bits first: a shorter integer never needs the comparison; never str(), which
            # Python 3.11+ refuses past 4,300 digits (an integer built in Python, not parsed).
            if item.bit_length() >= _INTEGER_LIMIT_BITS and not -_INTEGER_LIMIT < item < _INTEGER_LIMIT:
                return f"contain an integer of more than {MAX_INTEGER_DIGITS:,} digits"
            chars += 8
        else:
            chars += 8
        if chars > MAX_ARGUMENT_CHARS:
            return f"are larger than {MAX_ARGUMENT_CHARS:,} characters"
    return None
