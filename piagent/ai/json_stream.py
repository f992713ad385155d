"""Tolerant parsing of streaming tool-call JSON (docs/llm.md#partial-tool-call-json).

:func:`parse_streaming_json` turns the argument text received so far into a value:

1. empty, whitespace-only or ``None`` -> ``{}``;
2. a strict parse; failing that, a strict parse of :func:`repair_json` of the text if the
   repair changed it (a strict ``"null"`` gives ``None``, which is passed through);
3. failing that, a *partial* parse that completes truncated input: unterminated strings,
   numbers, arrays, objects and literals are closed, an unfinished key/value pair is dropped
   (``{"a": "he`` -> ``{"a": "he"}``, ``{"a":`` -> ``{}``); a ``None`` result becomes ``{}``;
4. failing that, a partial parse of the repaired text; failing that too, ``{}``.

Choices where pi's reference (the npm ``partial-json`` package) is loose, made once here:

* "strict" means RFC 8259: ``NaN`` and ``Infinity`` are rejected, as JavaScript does;
* the partial parser is strict about everything except the cut: a syntax error anywhere makes
  it fail (so the whole result is ``{}``), except that text after a complete top-level value
  is ignored (``{"a": 1}}`` -> ``{"a": 1}``);
* at the cut, a number is completed as far as it is a number (``1.`` -> ``1``, ``1.5e-`` ->
  ``1.5``, a lone ``-`` is dropped with its key); a literal prefix (``t``, ``fal``, ``nu``)
  gives its literal; an escape cut short (``\\``, ``\\u12``) and a ``\\uD8xx`` high surrogate
  still waiting for its low half are left out of the string.

:class:`IncrementalJsonParser` gives the same result for every prefix of a stream at a cost
linear in the total length, without re-reading the text received before. Both read with the
resumable tokenizer of :mod:`piagent.ai._json_machine`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from ..exceptions import InvalidValueError
from ._json_machine import DONE, ESCAPES, HEX, NOTHING, Invalid, JsonMachine
from .arguments_check import read_integer

__all__ = ["IncrementalJsonParser", "parse_streaming_json", "repair_json"]


_STR_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_NAMED_CONTROLS: dict[str, str] = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _reject_constant(name: str) -> Any:
    raise InvalidValueError(f"{name} is not JSON")


# RFC 8259: no NaN or Infinity; an integer too long to read is kept as OverlongInteger
_STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_int=read_integer)


def parse_streaming_json(text: Optional[str]) -> Any:
    """Best-effort value of possibly truncated or slightly broken JSON; never raises.

    Returns ``{}`` when nothing usable can be read. See the module docstring for the rules.
    """
    if text is None or not text.strip():
        return {}
    try:
        return _STRICT.decode(text)
    except (ValueError, RecursionError):
        pass
    repaired = repair_json(text)
    if repaired != text:
        try:
            return _STRICT.decode(repaired)
        except (ValueError, RecursionError):
            pass
    try:
        value = _partial(text)
    except Invalid:
        try:
            value = _partial(repaired)
        except Invalid:
            return {}
    return {} if value is None else value


def repair_json(text: str) -> str:
    """Escape what JSON forbids inside string literals; text outside strings is unchanged.

    Raw U+0000-U+001F become ``\\b \\f \\n \\r \\t`` or ``\\u00XX``; a backslash not starting a
    valid escape (``" \\ / b f n r t`` or ``u`` + 4 hex digits), or ending the text, is doubled.
    """
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        if not in_string:
            j = text.find('"', i)
            if j < 0:
                out.append(text[i:])
                break
            out.append(text[i : j + 1])
            i, in_string = j + 1, True
            continue
        m = _STR_RUN.match(text, i)
        if m is not None:
            out.append(m.group())
            i = m.end()
            continue
        c = text[i]
        if c == '"':
            out.append(c)
            i, in_string = i + 1, False
        elif c == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt and nxt in ESCAPES:
                out.append(text[i : i + 2])
                i += 2
            elif nxt == "u" and len(text) >= i + 6 and all(h in HEX for h in text[i + 2 : i + 6]):
                out.append(text[i : i + 6])
                i += 6
            else:
                out.append("\\\\")
                i += 1
        else:
            out.append(_NAMED_CONTROLS.get(c) or f"\\u{ord(c):04x}")
            i += 1
    return "".join(out)


def _partial(text: str) -> Any:
    """Step 3/4 parser: complete a truncated document; raise :class:`Invalid` on bad syntax."""
    machine = JsonMachine(tolerant=False)
    machine.feed(text)
    value = machine.current()
    return None if value is NOTHING else value


class IncrementalJsonParser:
    """Feed tool-call argument deltas; read the value so far after each one.

    ``value()`` always equals ``parse_streaming_json(text)`` for the text fed so far, and the
    whole stream costs time linear in its length: each delta is read once, and ``value()`` only
    completes the scalar in progress (a string in progress is extended, not rebuilt; on CPython
    in place, so reading after every delta stays amortised O(delta)).

    Text needing the repair of :func:`repair_json` (raw control characters, bad escapes) is read
    as repaired on the fly; there is no fallback re-parse. Text that cannot become JSON makes
    ``value()`` return ``{}`` from then on.

    ``value()`` returns the *live* containers being built: later ``feed()`` calls keep adding
    entries to them and replace the last, in-progress entry of each open container. Take a copy
    (``copy.deepcopy``) to keep a snapshot. Not thread-safe: feed and read from one thread.
    """

    def __init__(self) -> None:
        self._machine: Optional[JsonMachine] = JsonMachine(tolerant=True)
        self._chunks: list[str] = []

    def feed(self, delta: str) -> None:
        """Append ``delta`` to the text."""
        if not delta:
            return
        self._chunks.append(delta)
        if self._machine is not None:
            try:
                self._machine.feed(delta)
            except Invalid:
                self._machine = None

    def value(self) -> Any:
        """``parse_streaming_json`` of the text fed so far."""
        machine = self._machine
        if machine is None:
            return {}
        try:
            value = machine.current()
        except Invalid:
            self._machine = None
            return {}
        if machine.state == DONE and not machine.trailing:
            return value  # a complete document: even ``null`` is passed through
        return {} if value is NOTHING or value is None else value

    @property
    def text(self) -> str:
        """All text fed so far (the deltas are joined lazily, once per read after new ones)."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""
