"""Google-style docstrings: the description, and the entries of the ``Args:`` section.

    Fetch a page.

    Longer text, kept as part of the description.

    Args:
        url: The address to fetch.
        timeout (float): Seconds to wait; a description may go on
            over several indented lines.

    Returns:
        The body.

The description is everything before the first section header. ``Args:`` (also spelled
``Arguments:``, ``Parameters:``, ``Params:``, ``Keyword Args:``...) and ``Attributes:`` give
the entries; every other section (``Returns:``, ``Raises:``, ``Examples:``...) is ignored.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["Docstring", "parse_docstring"]

_ARG_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
    "attributes",
}
_OTHER_SECTIONS = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "exceptions",
    "examples",
    "example",
    "note",
    "notes",
    "see also",
    "warning",
    "warnings",
    "todo",
    "references",
    "methods",
}
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:(.*)$")


@dataclass
class Docstring:
    """A parsed docstring: ``description`` and ``params`` (name -> description)."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: Optional[str]) -> Docstring:
    """Parse a Google-style docstring; None or "" gives an empty :class:`Docstring`."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: Optional[str] = None
    body: list[str] = []
    for line in lines:
        name = _section_name(line)
        if name is not None:
            if section in _ARG_SECTIONS:
                params.update(_parse_entries(body))
            section, body = name, []
        elif section is None:
            description.append(line)
        else:
            body.append(line)
    if section in _ARG_SECTIONS:
        params.update(_parse_entries(body))
    return Docstring("\n".join(description).strip(), params)


def _section_name(line: str) -> Optional[str]:
    """The lower-cased section name if ``line`` is an unindented known section header."""
    match = _HEADER.match(line)
    if match is None:
        return None
    name = match.group(1).strip().lower()
    return name if name in _ARG_SECTIONS or name in _OTHER_SECTIONS else None


def _parse_entries(body: list[str]) -> dict[str, str]:
    """``name (type): text`` entries at the section's indentation; deeper lines continue them."""
    entries: dict[str, list[str]] = {}
    indent: Optional[int] = None
    current: Optional[list[str]] = None
    for line in body:
        stripped = line.strip()
        if not stripped:
            if current is not None:
                current.append("")
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        match = _ENTRY.match(stripped) if depth <= indent else None
        if match is not None:
            current = entries.setdefault(match.group(1), [])
            current.append(match.group(2).strip())
        elif current is not None:
            current.append(stripped)
    return {name: _join(parts) for name, parts in entries.items()}


def _join(parts: list[str]) -> str:
    """Join continuation lines with spaces; a blank line starts a new paragraph."""
    paragraphs: list[str] = []
    words: list[str] = []
    for part in parts:
        if part:
            words.append(part)
        elif words:
            paragraphs.append(" ".join(words))
            words = []
    if words:
        paragraphs.append(" ".join(words))
    return "\n\n".join(paragraphs)
