"""Schemas whose ``anyOf``/``oneOf`` alternatives nest into exponential work, refused before use.

Checking a value against ``anyOf`` tries its alternatives in turn, and coercion tries each on
a copy: alternatives inside alternatives multiply. Two alternatives nested 15 deep make 32,768
paths: seconds to minutes of one thread holding the GIL, during which an abort is not seen.
:func:`alternatives_problem` counts, along every path through the schema, the product of the
alternatives that have sub-schemas of their own (``{"type": "null"}`` in an ``Optional`` does
not multiply anything), following the schema's local ``$ref`` as the validator does, and
refuses a schema where it exceeds :data:`MAX_ALTERNATIVE_PATHS`.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["MAX_ALTERNATIVE_PATHS", "alternatives_problem"]

#: The most paths through nested ``anyOf``/``oneOf`` a schema may have (docs/llm.md#tool-arguments).
MAX_ALTERNATIVE_PATHS = 64


def alternatives_problem(schema: Any) -> Optional[str]:
    """Why ``schema`` is refused for its nested alternatives, or None."""
    try:
        paths = _Counter(schema).paths(schema)
    except RecursionError:
        return "it is nested too deeply to check"
    if paths > MAX_ALTERNATIVE_PATHS:
        return (
            f"its anyOf/oneOf alternatives nest into more than {MAX_ALTERNATIVE_PATHS} paths, "
            "which take exponential time to check"
        )
    return None


class _Counter:
    """Counts paths through ``root``, following its local ``$ref`` (``#/$defs/...``): the
    alternatives behind references multiply like written-out ones. A reference back into what
    is being counted (a recursive schema) counts once."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.seen: dict[int, int] = {}

    def paths(self, node: Any) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        known = self.seen.get(id(node))
        if known is not None:
            return known
        self.seen[id(node)] = 1
        values = list(node.values()) if isinstance(node, dict) else node
        most = max((self.paths(value) for value in [*values, self._target(node)]), default=1)
        if isinstance(node, dict):
            for keyword in ("anyOf", "oneOf"):
                alternatives = node.get(keyword)
                if isinstance(alternatives, list) and alternatives:
                    branching = sum(1 for alternative in alternatives if self._has_subschemas(alternative)) or 1
                    most = max(most, branching * max(self.paths(alternative) for alternative in alternatives))
        most = min(most, MAX_ALTERNATIVE_PATHS + 1)  # enough to refuse; keeps the numbers small
        self.seen[id(node)] = most
        return most

    def _target(self, node: Any) -> Any:
        """What the local ``$ref`` (``"#/..."``) of ``node`` points to in the root, or None."""
        reference = node.get("$ref") if isinstance(node, dict) else None
        if isinstance(reference, str) and reference.startswith("#"):
            return _pointer(self.root, reference[1:])
        return None

    def _has_subschemas(self, alternative: Any, hops: int = 0) -> bool:
        if not isinstance(alternative, dict):
            return False
        if any(isinstance(value, (dict, list)) for value in alternative.values()):
            return True
        target = self._target(alternative)
        return target is not None and hops < MAX_ALTERNATIVE_PATHS and self._has_subschemas(target, hops + 1)


def _pointer(root: Any, pointer: str) -> Any:
    """The value at JSON pointer ``pointer`` ("/$defs/A") in ``root``, or None."""
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
