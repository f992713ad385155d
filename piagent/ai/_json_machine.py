"""The resumable JSON reader behind :mod:`piagent.ai.json_stream`.

:class:`JsonMachine` reads JSON text in pieces of any size and builds the value as it goes, so
that the value so far (completed at the cut, by the rules of :mod:`~piagent.ai.json_stream`)
can be read after every piece without reading the text again. This is the per-delta path of
every streamed tool call: runs of plain string content are matched by one regular expression
and their escapes decoded by ``json``'s C scanner.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from ..exceptions import InvalidValueError
from .arguments_check import read_integer

__all__ = ["DONE", "ESCAPES", "HEX", "NOTHING", "Invalid", "JsonMachine"]

_WS = frozenset(" \t\n\r")
_WS_RUN = re.compile(r"[ \t\n\r]+")
_NON_WS = re.compile(r"[^ \t\n\r]")
# String content up to the next quote, control character or escape that is not complete and
# simple: plain characters, \" \\ \/ \b \f \n \r \t and \uXXXX outside the surrogate range
# (surrogate halves may arrive in different deltas; the character-level path pairs them).
_STR_FAST = re.compile(r'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})+')
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]  # public at run time, absent from the stubs
HEX = frozenset("0123456789abcdefABCDEF")
ESCAPES: dict[str, str] = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_LITERALS: dict[str, Any] = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}

# Parser states; those before STRING are between tokens.
(VALUE, ARRAY_FIRST, OBJECT_FIRST, KEY, COLON, AFTER, STRING, ESCAPE, UNICODE, NUMBER, LITERAL, DONE) = range(12)
# Number states: after "-", "0", other integer digits, ".", fraction digits, "e", "e-", exponent digits.
_N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_E_SIGN, _N_EXP = range(8)
_N_CAN_END = frozenset((_N_ZERO, _N_INT, _N_FRAC, _N_EXP))

NOTHING: Any = object()  # "no value here (yet)"


class Invalid(InvalidValueError):
    """Text that no continuation can turn into JSON."""


class JsonMachine:
    """A resumable JSON tokenizer that builds the value as it goes.

    ``feed()`` may be called with any split of the text. Containers are created when opened and
    inserted into their parent at once; scalars are inserted when complete. ``current()``
    additionally places the scalar being read (its completion at the cut) and returns the root.

    With ``tolerant=False`` a raw control character or a bad escape inside a string raises
    :class:`Invalid`; with ``tolerant=True`` it is read as
    :func:`~piagent.ai.json_stream.repair_json` would have made
    it read, and ``repaired`` is set. Structural errors always raise.
    """

    def __init__(self, tolerant: bool) -> None:
        self.tolerant = tolerant
        self.repaired = False
        self.state = VALUE
        self.root: Any = NOTHING
        self.trailing = False  # non-whitespace after the top-level value
        self._stack: list[Any] = []  # open containers, innermost last
        self._keys: list[Any] = []  # per open dict, the key being read
        self._slot = False  # current() put a provisional entry for the scalar in progress
        # string in progress
        self._is_key = False
        self._parts: list[str] = []
        self._joined = ""
        self._high: Optional[int] = None  # a high surrogate waiting for its low half
        self._hex = ""
        # number / literal in progress
        self._num: list[str] = []
        self._num_state = _N_MINUS
        self._word = ""
        self._word_pos = 0
        self._word_value: Any = None

    # -- reading -------------------------------------------------------------------

    def feed(self, s: str) -> None:
        i, n = 0, len(s)
        while i < n:
            st = self.state
            if st < STRING:  # between tokens: a structural character, or whitespace
                c = s[i]
                if c in _WS:
                    i = _WS_RUN.match(s, i).end()  # type: ignore[union-attr]  # c starts a run
                else:
                    i += 1
                    self._structural(c)
            elif st == STRING:
                m = _STR_FAST.match(s, i)
                if m is not None:
                    run = m.group()
                    if "\\" in run:  # scanstring decodes its escapes (in C) up to the quote we add
                        run = _scanstring(run + '"', 0)[0]
                    if self._high is None:
                        self._parts.append(run)
                    else:
                        self._put(run)
                    i = m.end()
                    continue
                c = s[i]
                i += 1
                if c == '"':
                    self._end_string()
                elif c == "\\":
                    self.state = ESCAPE
                else:  # raw control character
                    self._content_error()
                    self._put(c)
            elif st == ESCAPE:
                c = s[i]
                if c in ESCAPES:
                    self._put(ESCAPES[c])
                    self.state = STRING
                    i += 1
                elif c == "u":
                    self._hex = ""
                    self.state = UNICODE
                    i += 1
                else:  # keep the backslash, then read c as an ordinary character
                    self._content_error()
                    self._put("\\")
                    self.state = STRING
            elif st == UNICODE:
                c = s[i]
                if c in HEX:
                    i += 1
                    self._hex += c
                    if len(self._hex) == 4:
                        self.state = STRING
                        self._code_point(int(self._hex, 16))
                else:
                    self._content_error()
                    self._put("\\u" + self._hex)
                    self.state = STRING
            elif st == NUMBER:
                i = self._number(s, i, n)
            elif st == LITERAL:
                if s[i] != self._word[self._word_pos]:
                    raise Invalid(s[i])
                i += 1
                self._word_pos += 1
                if self._word_pos == len(self._word):
                    self._emit(self._word_value)
            else:  # DONE
                if _NON_WS.search(s, i) is not None:
                    self.trailing = True
                return

    def _structural(self, c: str) -> None:
        st = self.state
        if st in (VALUE, ARRAY_FIRST):
            if c == "]" and st == ARRAY_FIRST:
                self._close()
            else:
                self._begin_value(c)
        elif st in (OBJECT_FIRST, KEY):
            if c == '"':
                self._begin_string(is_key=True)
            elif c == "}" and st == OBJECT_FIRST:
                self._close()
            else:
                raise Invalid(c)
        elif st == COLON:
            if c != ":":
                raise Invalid(c)
            self.state = VALUE
        else:  # AFTER
            is_dict = type(self._stack[-1]) is dict
            if c == ",":
                self.state = KEY if is_dict else VALUE
            elif c == ("}" if is_dict else "]"):
                self._close()
            else:
                raise Invalid(c)

    def _begin_value(self, c: str) -> None:
        if c == '"':
            self._begin_string(is_key=False)
        elif c == "{" or c == "[":
            container: Any = {} if c == "{" else []
            if self._stack:
                self._store(container)  # no scalar is in progress: never replaces
            else:
                self.root = container
            self._stack.append(container)
            if c == "{":
                self._keys.append(None)
                self.state = OBJECT_FIRST
            else:
                self.state = ARRAY_FIRST
        elif c == "-" or "0" <= c <= "9":
            self._num = [c]
            self._num_state = _N_MINUS if c == "-" else _N_ZERO if c == "0" else _N_INT
            self.state = NUMBER
        elif c in _LITERALS:
            self._word, self._word_value = _LITERALS[c]
            self._word_pos = 1
            self.state = LITERAL
        else:
            raise Invalid(c)

    def _close(self) -> None:
        if type(self._stack.pop()) is dict:
            self._keys.pop()
        self.state = AFTER if self._stack else DONE

    def _emit(self, value: Any) -> None:
        """A scalar is complete: store it and expect what follows a value."""
        if not self._stack:
            self.root = value
            self.state = DONE
            return
        self._store(value)
        self._slot = False
        self.state = AFTER

    def _store(self, value: Any) -> None:
        """Put ``value`` in the innermost container: under the key being read, or as the last
        item (replacing the provisional one :meth:`current` placed)."""
        top = self._stack[-1]
        if type(top) is dict:
            top[self._keys[-1]] = value
        elif self._slot:
            top[-1] = value
        else:
            top.append(value)

    # -- strings ---------------------------------------------------------------------

    def _begin_string(self, is_key: bool) -> None:
        self._is_key = is_key
        self._parts = []
        self._joined = ""
        self._high = None
        self.state = STRING

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
            raise Invalid("string content")
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
            self.state = COLON
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
        if self.repaired and self.state != STRING:
            # The repaired text doubled the backslash of the escape cut short.
            pending = "\\" if self.state == ESCAPE else "\\u" + self._hex
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
                    raise Invalid("leading zero")
                if ns == _N_MINUS:
                    ns = _N_ZERO if c == "0" else _N_INT
                elif ns == _N_DOT:
                    ns = _N_FRAC
                elif ns in (_N_E, _N_E_SIGN):
                    ns = _N_EXP
            elif c == "." and (ns in (_N_ZERO, _N_INT)):
                ns = _N_DOT
            elif (c == "e" or c == "E") and (ns in (_N_ZERO, _N_INT, _N_FRAC)):
                ns = _N_E
            elif (c == "+" or c == "-") and ns == _N_E:
                ns = _N_E_SIGN
            else:
                if ns not in _N_CAN_END:
                    raise Invalid(c)
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
            return NOTHING
        if ns in (_N_DOT, _N_E):
            text = text[:-1]
        elif ns == _N_E_SIGN:
            text = text[:-2]
        return _to_number(text)

    # -- the value so far --------------------------------------------------------------

    def current(self) -> Any:
        """The value read so far, completed at the cut; ``NOTHING`` when there is none."""
        st = self.state
        if st == DONE or (st == VALUE and not self._stack):
            return self.root
        if st in (STRING, ESCAPE, UNICODE) and not self._is_key:
            leaf = self._string_so_far()
        elif st == NUMBER:
            leaf = self._number_so_far()
        elif st == LITERAL:
            leaf = self._word_value
        else:
            return self.root
        if not self._stack:
            return leaf
        if leaf is not NOTHING:
            self._store(leaf)
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
        return read_integer(text)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
