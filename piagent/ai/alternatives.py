"""Schemas whose ``anyOf``/``oneOf`` alternatives nest into exponential work, refused before use.

Checking a value against ``anyOf`` tries its alternatives in turn, and coercion tries each on
a copy: alternatives inside alternatives multiply. Two alternatives nested 15 deep make 32,768
paths: seconds to minutes of one thread holding the GIL, during which an abort is not seen.
:func:`alternatives_problem` counts, along every path through the schema, the product of the
alternatives that have sub-schemas of their own (``{"type": "null"}`` in an ``Optional`` does
not multiply anything) and refuses a schema where it exceeds :data:`MAX_ALTERNATIVE_PATHS`.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["MAX_ALTERNATIVE_PATHS", "alternatives_problem"]

#: The most paths through nested ``anyOf``/``oneOf`` a schema may have (docs/llm.md#tool-arguments).
MAX_ALTERNATIVE_PATHS = 64


def alternatives_problem(schema: Any) -> Optional[str]:
    """Why ``schema`` is refused for its nested alternatives, or None."""
    try:
        paths = _paths(schema, {})
    except RecursionError:
        return "it is nested too deeply to check"
    if paths > MAX_ALTERNATIVE_PATHS:
        return (
            f"its anyOf/oneOf alternatives nest into more than {MAX_ALTERNATIVE_PATHS} paths, "
            "which take exponential time to check"
        )
    return None


def _paths(node: Any, seen: dict[int, int]) -> int:
    if not isinstance(node, (dict, list)):
        return 1
    known = seen.get(id(node))
    if known is not None:
        return known
    seen[id(node)] = 1
    values = list(node.values()) if isinstance(node, dict) else node
    most = max((_paths(value, seen) for value in values), default=1)
    if isinstance(node, dict):
        for keyword in ("anyOf", "oneOf"):
            alternatives = node.get(keyword)
            if isinstance(alternatives, list) and alternatives:
                branching = sum(1 for alternative in alternatives if _has_subschemas(alternative)) or 1
                most = max(most, branching * max(_paths(alternative, seen) for alternative in alternatives))
    most = min(most, MAX_ALTERNATIVE_PATHS + 1)  # enough to refuse; keeps the numbers small
    seen[id(node)] = most
    return most


def _has_subschemas(alternative: Any) -> bool:
    return isinstance(alternative, dict) and any(isinstance(value, (dict, list)) for value in alternative.values())
