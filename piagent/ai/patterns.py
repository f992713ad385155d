"""Schema ``pattern``s that can take exponential time, refused before any argument meets them.

Python's ``re`` holds the GIL while it matches: a catastrophic pattern such as ``^(a+)+$``
against 30 characters freezes every thread of the process, so neither an abort nor a tool
timeout could end it. :func:`slow_pattern_problem` finds the shape behind such patterns: an
unbounded repeat whose body can match through one inner unbounded repeat alone (everything
else in the body may match nothing), as in ``(a+)+``, ``(a*)*``, ``(\\w+\\s?)*``, ``(\\d+|x)*``.
A pattern with a required separator, as ``([a-z]+\\.)+``, is accepted. Not detected: a repeated
alternation whose branches can match the same text, as ``(a|a)+`` (docs/providers.md#limits).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Optional

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # private, but the only parser of re's syntax
except ImportError:  # pragma: no cover - Python 3.9 and 3.10
    import sre_parse

__all__ = ["schema_patterns", "slow_pattern_problem"]

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")


def schema_patterns(schema: Any) -> Iterator[str]:
    """Every regular expression in a JSON Schema: ``pattern`` values and ``patternProperties`` keys."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                yield pattern
            properties = node.get("patternProperties")
            if isinstance(properties, dict):
                yield from (key for key in properties if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def slow_pattern_problem(pattern: str) -> Optional[str]:
    """Why ``pattern`` may take exponential time, or None (also None for what ``re`` cannot read)."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    if _nested_repeat(list(parsed), parsed.state):
        return f"the pattern {pattern!r} repeats a group that itself repeats, which can take exponential time"
    return None


def _flat(items: list[Any]) -> list[Any]:
    """``items`` with the contents of plain groups spliced in."""
    out: list[Any] = []
    for op, av in items:
        if str(op) == "SUBPATTERN":
            out.extend(_flat(list(av[-1])))
        else:
            out.append((op, av))
    return out


def _min_width(item: Any, state: Any) -> int:
    return int(sre_parse.SubPattern(state, [item]).getwidth()[0])


def _nested_repeat(items: list[Any], state: Any) -> bool:
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            _, high, body = av
            if high > 1 and _ambiguous_body(_flat(list(body)), state):
                return True
            inner = [body]
        elif name == "SUBPATTERN":
            inner = [av[-1]]
        elif name == "BRANCH":
            inner = list(av[1])
        elif name in ("ASSERT", "ASSERT_NOT"):
            inner = [av[1]]
        else:
            continue
        if any(_nested_repeat(list(sub), state) for sub in inner):
            return True
    return False


def _ambiguous_body(body: list[Any], state: Any) -> bool:
    """The body of a repeat can match through one unbounded inner repeat with all else empty
    (that repeat may sit in one alternative of a branch, as in ``(\\d+|x)*``, or in an
    optional part, as in ``((a+)?)+``)."""
    solid = [index for index, item in enumerate(body) if _min_width(item, state) > 0]
    for index, (op, av) in enumerate(body):
        if solid and solid != [index]:
            continue  # something else in the body must match at least one character
        if str(op) in _REPEATS:
            low, high, inner = av
            if high > 1 and high != low:  # a repeat of variable length
                return True
            if _ambiguous_body(_flat(list(inner)), state):  # an optional or fixed repeat of one
                return True
        if str(op) == "BRANCH" and any(_ambiguous_body(_flat(list(branch)), state) for branch in av[1]):
            return True
    return False
