"""Tolerant parsing of streaming tool-call JSON (spec §2.4).

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
linear in the total length, without re-reading the text received before.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

__all__ = ["IncrementalJsonParser", "parse_streaming_json", "repair_json"]

_WS_RUN = re.compile(r"[ \t\n\r]+")
_NON_WS = re.compile(r"[^ \t\n\r]")
_STR_RUN = re.compile(r'[^"\\\x00-\x1f]+')
# String content up to the next quote, control character or escape that is not complete and
# simple: plain characters, \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogate range
# (surrogate halves may arrive in different deltas; the character-level path pairs them).
_STR_FAST = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})+')
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES: Dict[str, str] = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}
_NAMED_CONTROLS: Dict[str, str] = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LITERALS: Dict[str, Any] = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}

# Parser states.
(_VALUE, _ARRAY_FIRST, _OBJECT_FIRST, _KEY, _COLON, _AFTER,
 _STRING, _ESCAPE, _UNICODE, _NUMBER, _LITERAL, _DONE) = range(12)
# Number states: after "-", "0", other integer digits, ".", fraction digits, "e", "e-", exponent digits.
_N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_E_SIGN, _N_EXP = range(8)
_N_CAN_END = frozenset((_N_ZERO, _N_INT, _N_FRAC, _N_EXP))

_NOTHING: Any = object()  # "no value here (yet)"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


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
    except _Invalid:
        try:
            value = _partial(repaired)
        except _Invalid:
            return {}
    return {} if value is None else value


def repair_json(text: str) -> str:
    """Escape what JSON forbids inside string literals; text outside strings is unchanged.

    Raw U+0000-U+001F become ``\\b \\f \\n \\r \\t`` or ``\\u00XX``; a backslash not starting a
    valid escape (``" \\ / b f n r t`` or ``u`` + 4 hex digits), or ending the text, is doubled.
    """
    out: List[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        if not in_string:
            j = text.find('"', i)
            if j < 0:
                out.append(text[i:])
                break
            out.append(text[i:j + 1])
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
            nxt = text[i + 1:i + 2]
            if nxt and nxt in _ESCAPES:
                out.append(text[i:i + 2])
                i += 2
            elif nxt == "u" and len(text) >= i + 6 and all(h in _HEX for h in text[i + 2:i + 6]):
                out.append(text[i:i + 6])
                i += 6
            else:
                out.append("\\\\")
                i += 1
        else:
            out.append(_NAMED_CONTROLS.get(c) or "\\u%04x" % ord(c))
            i += 1
    return "".join(out)


def _partial(text: str) -> Any:
    """Step 3/4 parser: complete a truncated document; raise :class:`_Invalid` on bad syntax."""
    machine = _Machine(tolerant=False)
    machine.feed(text)
    value = machine.current()
    return None if value is _NOTHING else value


class _Invalid(Exception):
    """Text that no continuation can turn into JSON."""


class _Machine:
    """A resumable JSON tokenizer that builds the value as it goes.

    ``feed()`` may be called with any split of the text. Containers are created when opened and
    inserted into their parent at once; scalars are inserted when complete. ``current()``
    additionally places the scalar being read (its completion at the cut) and returns the root.

    With ``tolerant=False`` a raw control character or a bad escape inside a string raises
    :class:`_Invalid`; with ``tolerant=True`` it is read as :func:`repair_json` would have made
    it read, and ``repaired`` is set. Structural errors always raise.
    """

    def __init__(self, tolerant: bool) -> None:
        self.tolerant = tolerant
        self.repaired = False
        self.state = _VALUE
        self.root: Any = _NOTHING
        self.trailing = False  # non-whitespace after the top-level value
        self._stack: List[Any] = []  # open containers, innermost last
        self._keys: List[Any] = []  # per open dict, the key being read
        self._slot = False  # current() put a provisional entry for the scalar in progress
        # string in progress
        self._is_key = False
        self._parts: List[str] = []
        self._joined = ""
        self._high: Optional[int] = None  # a high surrogate waiting for its low half
        self._hex = ""
        # number / literal in progress
        self._num: List[str] = []
        self._num_state = _N_MINUS
        self._word = ""
        self._word_pos = 0
        self._word_value: Any = None

    # -- reading -------------------------------------------------------------------

    def feed(self, s: str) -> None:
        i, n = 0, len(s)
        while i < n:
            st = self.state
            if st == _STRING:
                m = _STR_FAST.match(s, i)
                if m is not None:
                    run = m.group()
                    # scanstring decodes the escapes of a run (in C) up to the quote we add
                    self._put(_scanstring(run + '"', 0)[0] if "\\" in run else run)
                    i = m.end()
                    continue
                c = s[i]
                i += 1
                if c == '"':
                    self._end_string()
                elif c == "\\":
                    self.state = _ESCAPE
                else:  # raw control character
                    self._content_error()
                    self._put(c)
            elif st == _ESCAPE:
                c = s[i]
                if c in _ESCAPES:
                    self._put(_ESCAPES[c])
                    self.state = _STRING
                    i += 1
                elif c == "u":
                    self._hex = ""
                    self.state = _UNICODE
                    i += 1
                else:  # keep the backslash, then read c as an ordinary character
                    self._content_error()
                    self._put("\\")
                    self.state = _STRING
            elif st == _UNICODE:
                c = s[i]
                if c in _HEX:
                    i += 1
                    self._hex += c
                    if len(self._hex) == 4:
                        self.state = _STRING
                        self._code_point(int(self._hex, 16))
                else:
                    self._content_error()
                    self._put("\\u" + self._hex)
                    self.state = _STRING
            elif st == _NUMBER:
                i = self._number(s, i, n)
            elif st == _LITERAL:
                if s[i] != self._word[self._word_pos]:
                    raise _Invalid(s[i])
                i += 1
                self._word_pos += 1
                if self._word_pos == len(self._word):
                    self._emit(self._word_value)
            elif st == _DONE:
                if _NON_WS.search(s, i) is not None:
                    self.trailing = True
                return
            else:
                m = _WS_RUN.match(s, i)
                if m is not None:
                    i = m.end()
                else:
                    self._structural(s[i])
                    i += 1

    def _structural(self, c: str) -> None:
        st = self.state
        if st == _VALUE or st == _ARRAY_FIRST:
            if c == "]" and st == _ARRAY_FIRST:
                self._close()
            else:
                self._begin_value(c)
        elif st == _OBJECT_FIRST or st == _KEY:
            if c == '"':
                self._begin_string(is_key=True)
            elif c == "}" and st == _OBJECT_FIRST:
                self._close()
            else:
                raise _Invalid(c)
        elif st == _COLON:
            if c != ":":
                raise _Invalid(c)
            self.state = _VALUE
        else:  # _AFTER
            is_dict = type(self._stack[-1]) is dict
            if c == ",":
                self.state = _KEY if is_dict else _VALUE
            elif c == ("}" if is_dict else "]"):
                self._close()
            else:
                raise _Invalid(c)

    def _begin_value(self, c: str) -> None:
        if c == '"':
            self._begin_string(is_key=False)
        elif c == "{" or c == "[":
            container: Any = {} if c == "{" else []
            if not self._stack:
                self.root = container
            elif type(self._stack[-1]) is dict:
                self._stack[-1][self._keys[-1]] = container
            else:
                self._stack[-1].append(container)
            self._stack.append(container)
            if c == "{":
                self._keys.append(None)
                self.state = _OBJECT_FIRST
            else:
                self.state = _ARRAY_FIRST
        elif c == "-" or "0" <= c <= "9":
            self._num = [c]
            self._num_state = _N_MINUS if c == "-" else _N_ZERO if c == "0" else _N_INT
            self.state = _NUMBER
        elif c in _LITERALS:
            self._word, self._word_value = _LITERALS[c]
            self._word_pos = 1
            self.state = _LITERAL
        else:
            raise _Invalid(c)

    def _close(self) -> None:
        if type(self._stack.pop()) is dict:
            self._keys.pop()
        self.state = _AFTER if self._stack else _DONE

    def _emit(self, value: Any) -> None:
        """A scalar is complete: store it and expect what follows a value."""
        if not self._stack:
            self.root = value
            self.state = _DONE
            return
        top = self._stack[-1]
        if type(top) is dict:
            top[self._keys[-1]] = value
        elif self._slot:
            top[-1] = value
        else:
            top.append(value)
        self._slot = False
        self.state = _AFTER

    # -- strings ---------------------------------------------------------------------

    def _begin_string(self, is_key: bool) -> None:
        self._is_key = is_key
        self._parts = []
        self._joined = ""
        self._high = None
        self.state = _STRING

    def _put(self, text: str) -> None:
        if self._high is not None:
            self._parts.append(chr(self._high))
            self._high = None
        self._parts.append(text)

    def _code_point(self, cp: int) -> None:
        high = self._high
        if high is not None and 0xDC00 <= cp <= 0xDFFF:
            self._high = None
            self._parts.append(chr(0x10000 + ((high - 0xD800) << 10) + (cp - 0xDC00)))
        elif 0xD800 <= cp <= 0xDBFF:
            if high is not None:
                self._parts.append(chr(high))
            self._high = cp
        else:
            self._put(chr(cp))

    def _content_error(self) -> None:
        if not self.tolerant:
            raise _Invalid("string content")
        self.repaired = True

    def _end_string(self) -> None:
        if self._high is not None:  # a lone high surrogate is kept, as json.loads does
            self._parts.append(chr(self._high))
            self._high = None
        self._release_slot()
        text = self._joined
        self._joined = ""
        text += "".join(self._parts)
        self._parts = []
        if self._is_key:
            self._keys[-1] = text
            self.state = _COLON
        else:
            self._emit(text)

    def _string_so_far(self) -> str:
        """The string in progress completed at the cut; amortised O(new text).

        The joined prefix is extended in place: our reference and the provisional entry are
        dropped first so that CPython can grow the string without copying it.
        """
        if self._parts:
            self._release_slot()
            text = self._joined
            self._joined = ""
            text += "".join(self._parts)
            self._parts = []
            self._joined = text
        if self.repaired and self.state != _STRING:
            # The repaired text doubled the backslash of the escape cut short.
            pending = "\\" if self.state == _ESCAPE else "\\u" + self._hex
            lone = "" if self._high is None else chr(self._high)
            return self._joined + lone + pending
        return self._joined

    # -- numbers -----------------------------------------------------------------------

    def _number(self, s: str, i: int, n: int) -> int:
        ns = self._num_state
        start = i
        while i < n:
            c = s[i]
            if "0" <= c <= "9":
                if ns == _N_ZERO:
                    raise _Invalid("leading zero")
                if ns == _N_MINUS:
                    ns = _N_ZERO if c == "0" else _N_INT
                elif ns == _N_DOT:
                    ns = _N_FRAC
                elif ns == _N_E or ns == _N_E_SIGN:
                    ns = _N_EXP
            elif c == "." and (ns == _N_ZERO or ns == _N_INT):
                ns = _N_DOT
            elif (c == "e" or c == "E") and (ns == _N_ZERO or ns == _N_INT or ns == _N_FRAC):
                ns = _N_E
            elif (c == "+" or c == "-") and ns == _N_E:
                ns = _N_E_SIGN
            else:
                if ns not in _N_CAN_END:
                    raise _Invalid(c)
                self._num.append(s[start:i])
                self._emit(_to_number("".join(self._num)))
                return i
            i += 1
        self._num.append(s[start:i])
        self._num_state = ns
        return i

    def _number_so_far(self) -> Any:
        text = "".join(self._num)
        self._num = [text]
        ns = self._num_state
        if ns == _N_MINUS:
            return _NOTHING
        if ns == _N_DOT or ns == _N_E:
            text = text[:-1]
        elif ns == _N_E_SIGN:
            text = text[:-2]
        return _to_number(text)

    # -- the value so far --------------------------------------------------------------

    def current(self) -> Any:
        """The value read so far, completed at the cut; ``_NOTHING`` when there is none."""
        st = self.state
        if st == _DONE or (st == _VALUE and not self._stack):
            return self.root
        if st in (_STRING, _ESCAPE, _UNICODE) and not self._is_key:
            leaf = self._string_so_far()
        elif st == _NUMBER:
            leaf = self._number_so_far()
        elif st == _LITERAL:
            leaf = self._word_value
        else:
            return self.root
        if not self._stack:
            return leaf
        if leaf is not _NOTHING:
            top = self._stack[-1]
            if type(top) is dict:
                top[self._keys[-1]] = leaf
            elif self._slot:
                top[-1] = leaf
            else:
                top.append(leaf)
            self._slot = True
        return self.root

    def _release_slot(self) -> None:
        if self._slot:
            top = self._stack[-1]
            if type(top) is dict:
                top[self._keys[-1]] = None
            else:
                top[-1] = None


def _to_number(text: str) -> Any:
    try:
        if "." in text or "e" in text or "E" in text:
            return float(text)
        return int(text)
    except ValueError as exc:  # e.g. more digits than int() accepts
        raise _Invalid(str(exc)) from None


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
        self._machine: Optional[_Machine] = _Machine(tolerant=True)
        self._chunks: List[str] = []

    def feed(self, delta: str) -> None:
        """Append ``delta`` to the text."""
        if not delta:
            return
        self._chunks.append(delta)
        if self._machine is not None:
            try:
                self._machine.feed(delta)
            except _Invalid:
                self._machine = None

    def value(self) -> Any:
        """``parse_streaming_json`` of the text fed so far."""
        machine = self._machine
        if machine is None:
            return {}
        try:
            value = machine.current()
        except _Invalid:
            self._machine = None
            return {}
        if machine.state == _DONE and not machine.trailing:
            return value  # a complete document: even ``null`` is passed through
        return {} if value is _NOTHING or value is None else value

    @property
    def text(self) -> str:
        """All text fed so far (the deltas are joined lazily, once per read after new ones)."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""
