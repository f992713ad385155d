"""Deeply nested JSON: a clear error with the bound instead of a RecursionError.

Python's ``json`` and ``jsonschema`` recurse once per level, so a value nested a few thousand
levels deep raises RecursionError wherever it goes. :func:`loads` and :func:`check_depth`
refuse such values first, naming what and the bound; the check itself is iterative.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Union

from ..exceptions import InvalidValueError

__all__ = ["MAX_RECORD_DEPTH", "MAX_SCHEMA_DEPTH", "check_depth", "loads", "loads_each", "may_be_deeper"]

#: Levels of nesting of a session record (JSON's own recursion is one frame per level).
MAX_RECORD_DEPTH = 200
#: Levels of nesting of an output schema (``--schema``, ``output_type``): ``jsonschema``
#: checks a schema with several frames per level and fails near 190.
MAX_SCHEMA_DEPTH = 100


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, (list, tuple)):
            continue
        if depth > limit:
            return True
        stack.extend((inner, depth + 1) for inner in item)
    return False


def check_depth(value: Any, what: str, limit: int, error: type[Exception] = InvalidValueError) -> None:
    """``error`` naming ``what`` when ``value`` (dicts, lists) is nested deeper than ``limit`` levels."""
    if _deeper_than(value, limit):
        raise error(f"{what} is nested deeper than {limit} levels")


def may_be_deeper(text: Union[str, bytes], limit: int) -> bool:
    """False when the JSON ``text`` cannot nest deeper than ``limit`` levels (it has no more
    brackets than that): most values skip :func:`check_depth`'s walk."""
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{") > limit
    return text.count("[") + text.count("{") > limit


def loads(
    data: Union[str, bytes], what: str, limit: int, error: type[Exception] = InvalidValueError, **options: Any
) -> Any:
    """``json.loads(data, **options)``, refusing nesting deeper than ``limit`` (``error`` naming
    ``what``); ValueError for what is not JSON, as ``json.loads`` raises it."""
    try:
        value = _json_loads(data, **options)
    except RecursionError:
        raise error(f"{what} is nested deeper than {limit} levels") from None
    if may_be_deeper(data, limit):
        check_depth(value, what, limit, error)
    return value


def loads_each(texts: Iterable[str], what: str, limit: int) -> list[Any]:
    """:func:`loads` of each text, for many small values at once (a remote run's events arrive a
    batch at a time): in one loop, the common case (one JSON value, no more brackets than
    ``limit``) one ``raw_decode`` each. A text :func:`loads` refuses gives its ValueError in
    the value's place."""
    values: list[Any] = []
    decode = _DECODER.raw_decode
    for text in texts:
        try:
            value, end = decode(text)
            if end == len(text) and text.count("[") + text.count("{") <= limit:
                values.append(value)
                continue
        except (ValueError, RecursionError):
            pass
        try:  # anything else: loads decides, and words the error
            values.append(loads(text, what, limit))
        except ValueError as exc:
            values.append(exc)
    return values


_DECODER = json.JSONDecoder()


def _json_loads(data: Union[str, bytes], **options: Any) -> Any:
    """``json.loads``; a str that is one JSON value and nothing else is decoded by
    ``JSONDecoder.raw_decode`` (half the time of ``json.loads`` for a small value: no wrappers, no
    whitespace scans). Anything else (whitespace around the value, a BOM, not JSON, options)
    goes to ``json.loads``, which decides and words the error."""
    if isinstance(data, str) and not options:
        try:
            value, end = _DECODER.raw_decode(data)
        except ValueError:
            return json.loads(data)
        if end == len(data):
            return value
    return json.loads(data, **options)
