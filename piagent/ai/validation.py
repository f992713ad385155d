"""Tool-argument validation: JSON Schema plus pi's type coercion (docs/llm.md#tool-arguments).

:func:`validate_tool_arguments` deep-copies a tool call's arguments, coerces them towards the
tool's ``parameters`` schema with :func:`coerce_value` (``"42"`` -> ``42`` for a number, and
so on, like AJV's ``coerceTypes``) and validates the result with ``jsonschema``. Failures
raise :class:`~piagent.exceptions.ToolArgumentsError` whose message is what the model sees::

    Validation failed for tool "<name>":
      - <path>: <message>

    Received arguments:
    <the original arguments as 2-space-indented JSON>

Schemas are validated with the draft named by their ``$schema`` (Draft 2020-12 when absent).
A compiled validator is cached per schema object: treat a schema as frozen once it has been
used. A schema with a ``pattern`` that can take exponential time (:mod:`.patterns`) is refused
when first used, before any argument meets it; at most :data:`MAX_REPORTED_ERRORS` errors are
collected. Coercion follows the keywords listed in docs/llm.md#tool-arguments only (``$ref`` is
not followed).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import re
import threading
from collections import OrderedDict
from decimal import Decimal
from typing import Any, Optional

from ..exceptions import ToolArgumentsError
from .alternatives import alternatives_problem
from .patterns import schema_patterns, slow_pattern_problem
from .types import Tool, ToolCall

__all__ = ["coerce_value", "prepare_validator", "schema_problem", "validate_json_value", "validate_tool_arguments"]

MAX_REPORTED_ERRORS = 20  # validation stops looking after this many errors
MAX_ERROR_CHARS = 500  # of one error's message
_NO: Any = object()  # "this conversion does not apply"
_CACHE_SIZE = 256
_EMPTY_SCHEMA: dict[str, Any] = {}
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)\Z")


def prepare_validator(schema: Any) -> None:
    """Compile (and cache) the validator of a tool's ``parameters`` now, so that the first call
    to the tool does not pay for it (nor for importing jsonschema). A bad schema is left for
    that call to report."""
    with contextlib.suppress(Exception):
        _compiled(schema if schema is not None else _EMPTY_SCHEMA)


def validate_tool_arguments(tool: Tool, tool_call: ToolCall) -> Any:
    """Return the coerced, validated copy of ``tool_call.arguments``; raise if invalid.

    ``tool`` needs ``.name`` and ``.parameters`` (a JSON Schema), ``tool_call`` needs
    ``.arguments``. The caller's arguments are never mutated. Raises
    :class:`~piagent.exceptions.ToolArgumentsError` with pi's message frame.
    """
    schema = tool.parameters if tool.parameters is not None else _EMPTY_SCHEMA
    return validate_json_value(tool_call.arguments, schema, f'tool "{tool.name}"', "arguments")


def validate_json_value(
    original: Any,
    schema: Any,
    subject: str,
    received: str = "value",
    raw_text: Optional[str] = None,
    *,
    keep_accepted: bool = False,
    owned: bool = False,
) -> Any:
    """Coerce and validate a copy of ``original`` (with ``owned``, ``original`` itself) against
    ``schema``, as for tool arguments.

    Returns the coerced copy (or value); raises :class:`~piagent.exceptions.ToolArgumentsError` whose
    message is the frame above with ``subject`` (``tool "name"``, ``output "Invoice"``) and
    ``received`` (``arguments``, ``output``) in it, and ``raw_text`` (the text ``original``
    was parsed from) in place of the indented JSON when given. With ``keep_accepted`` (a
    structured output), a value that one of its ``anyOf``/``oneOf`` alternatives accepts as it
    is stays as it is (``null`` for ``Optional[str]`` is not made ``""``); tool arguments keep
    pi's rule, where the first alternative that validates after coercion wins. ``owned``: the
    caller's own value, which nothing else holds (JSON it has just parsed), coerced in place
    instead of a copy; give ``raw_text`` with it, since the frame cannot show the original.
    """
    compiled = _compiled(schema)
    args = original if owned else copy.deepcopy(original)
    coerced = _coerce(args, schema, compiled, keep_accepted)
    if coerced is not args:
        if isinstance(coerced, dict) and isinstance(args, dict):
            args.clear()
            args.update(coerced)
        else:  # as pi does: a replaced top-level value never raises
            return coerced if compiled.validator.is_valid(coerced) else args
    errors = list(itertools.islice(compiled.validator.iter_errors(args), MAX_REPORTED_ERRORS + 1))
    if not errors:
        return args
    lines = sorted((_error_path(e), _short(e.message)) for e in errors[:MAX_REPORTED_ERRORS])
    listed = [f"  - {path}: {msg}" for path, msg in lines]
    if len(errors) > MAX_REPORTED_ERRORS:
        listed.append(f"  (more errors not listed: the first {MAX_REPORTED_ERRORS} are shown)")
    raise ToolArgumentsError(_failure_message(subject, listed, original, received, raw_text))


def _short(message: str) -> str:
    """A validator message, cut: jsonschema quotes the whole offending value in it."""
    return message if len(message) <= MAX_ERROR_CHARS else message[:MAX_ERROR_CHARS] + "..."


def coerce_value(value: Any, schema: Any) -> Any:
    """Coerce ``value`` towards ``schema`` (pi's rules); dicts and lists are changed in place.

    Returns the coerced value, which is a different object only where a value was replaced.
    """
    return _coerce(value, schema, _compiled(schema))


# --------------------------------------------------------------------------- messages


def _failure_message(
    subject: str, lines: list[str], original: Any, received: str, raw_text: Optional[str] = None
) -> str:
    block = "\n".join(lines) if lines else "Unknown validation error"
    shown = raw_text if raw_text is not None else json.dumps(original, indent=2, ensure_ascii=False, default=repr)
    return f"Validation failed for {subject}:\n{block}\n\nReceived {received}:\n{shown}"


def _error_path(error: Any) -> str:
    """AJV's instance path minus its leading ``/``, with ``/`` -> ``.``; ``root`` when empty."""
    path = ".".join(str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path)
    if error.validator == "required":
        missing = _missing_property(error)
        if missing is not None:
            path = f"{path}.{missing}" if path else missing
    return path or "root"


def _missing_property(error: Any) -> Optional[str]:
    instance, required = error.instance, error.validator_value
    if not isinstance(instance, dict) or not isinstance(required, list):
        return None
    missing = [p for p in required if isinstance(p, str) and p not in instance]
    for name in missing:
        if error.message == f"{name!r} is a required property":
            return name
    return missing[0] if missing else None


# --------------------------------------------------------------------------- validators


def schema_problem(schema: Any) -> Optional[str]:
    """Why ``schema`` is refused before any value meets it, or None: a ``pattern`` that can take
    exponential time (:mod:`.patterns`) or ``anyOf``/``oneOf`` nested into too many paths
    (:mod:`.alternatives`); either would hold the GIL for minutes."""
    for problem in (*map(slow_pattern_problem, schema_patterns(schema)), alternatives_problem(schema)):
        if problem is not None:
            return problem
    return None


class _Compiled:
    """A schema's validator, plus validators for its sub-schemas sharing its ``$ref`` root."""

    __slots__ = ("schema", "validator", "_subs")

    def __init__(self, schema: Any) -> None:
        # jsonschema is imported on first use: it is a third of the time of ``import piagent``
        from jsonschema import Draft202012Validator
        from jsonschema.validators import validator_for

        problem = schema_problem(schema)
        if problem is not None:
            raise ToolArgumentsError(f"The tool's parameter schema is refused: {problem}. Fix the schema.")
        self.schema = schema
        self.validator = validator_for(schema, default=Draft202012Validator)(schema)
        self._subs: dict[int, tuple[Any, Any]] = {}

    def is_valid(self, value: Any, sub: Any) -> bool:
        if sub is self.schema:
            return bool(self.validator.is_valid(value))
        hit = self._subs.get(id(sub))
        if hit is None or hit[0] is not sub:
            hit = (sub, self.validator.evolve(schema=sub))
            self._subs[id(sub)] = hit
        return bool(hit[1].is_valid(value))


_cache: OrderedDict[int, _Compiled] = OrderedDict()
_cache_lock = threading.Lock()


def _compiled(schema: Any) -> _Compiled:
    """The cached :class:`_Compiled` for this schema object (LRU of ``_CACHE_SIZE``).

    Entries hold the schema itself, so an id cannot be reused while cached; the identity
    check guards against it anyway.
    """
    key = id(schema)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit.schema is schema:
            _cache.move_to_end(key)
            return hit
    compiled = _Compiled(schema)
    with _cache_lock:
        _cache[key] = compiled
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


# --------------------------------------------------------------------------- coercion


def _coerce(value: Any, schema: Any, compiled: _Compiled, keep_accepted: bool = False) -> Any:
    if not isinstance(schema, dict):
        return value
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        for sub in all_of:
            value = _coerce(value, sub, compiled, keep_accepted)
    for keyword in ("anyOf", "oneOf"):
        alternatives = schema.get(keyword)
        if isinstance(alternatives, list):
            if keep_accepted and any(compiled.is_valid(value, alt) for alt in alternatives):
                continue
            for alt in alternatives:
                candidate = _coerce(copy.deepcopy(value), alt, compiled, keep_accepted)
                if compiled.is_valid(candidate, alt):
                    value = candidate
                    break
    types = _types(schema)
    if types and not (len(types) > 1 and any(_matches(value, t) for t in types)):
        for t in types:
            converted = _convert(value, t)
            if converted is not _NO:
                value = converted
                break
    if "object" in types and isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for key, sub in properties.items():
                if key in value:
                    value[key] = _coerce(value[key], sub, compiled, keep_accepted)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            known = properties if isinstance(properties, dict) else {}
            for key in value:
                if key not in known:
                    value[key] = _coerce(value[key], extra, compiled, keep_accepted)
    if "array" in types and isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, list):
            for i, sub in enumerate(items[: len(value)]):
                value[i] = _coerce(value[i], sub, compiled, keep_accepted)
        elif isinstance(items, dict):
            for i, item in enumerate(value):
                value[i] = _coerce(item, items, compiled, keep_accepted)
    return value


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    return []


def _is_number(value: Any) -> bool:
    """A JSON number: ``bool`` is an ``int`` subclass in Python but not a number in JSON."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matches(value: Any, json_type: str) -> bool:
    if json_type == "null":
        return value is None
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "integer":
        return _is_number(value) and (isinstance(value, int) or value.is_integer())
    if json_type == "number":
        return _is_number(value)
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "array":
        return isinstance(value, list)
    if json_type == "object":
        return isinstance(value, dict)
    return False


def _convert(value: Any, json_type: str) -> Any:
    """``value`` converted to ``json_type`` by pi's rules, or ``_NO`` if no rule applies."""
    if json_type == "number" or json_type == "integer":
        if value is None:
            return 0
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, str):
            number = _parse_number(value)
            if number is None:
                return _NO
            if json_type == "number" or isinstance(number, int):
                return number
            return int(number) if number.is_integer() else _NO  # "integer" from "2.0" or "1e3"
    elif json_type == "boolean":
        if value is None:
            return False
        if value == "true" or value == "false":
            return value == "true"
        if _is_number(value) and (value == 1 or value == 0):
            return value == 1
    elif json_type == "string":
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return _js_number_string(value)
    elif json_type == "null" and (value == "" or value is False or (_is_number(value) and value == 0)):
        return None
    return _NO


def _parse_number(text: str) -> Any:
    """JavaScript ``Number(text)`` when finite and ``text`` is not blank, else ``None``.

    Integer literals (also ``0x``/``0o``/``0b``) give ``int``, the others ``float``.
    """
    t = text.strip()
    try:
        if _RADIX.match(t):
            return int(t, 0)
        if not _DECIMAL.match(t):
            return None
        if "." in t or "e" in t or "E" in t:
            number = float(t)
            return number if math.isfinite(number) else None
        return int(t)
    except ValueError:  # more digits than int() accepts
        return None


def _js_number_string(x: float) -> str:
    """``String(x)`` in JavaScript: ``1.0`` -> ``"1"``, ``1e21`` -> ``"1e+21"``, ``1e-7`` -> ``"1e-7"``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)  # not "n"/"N"/"F": NaN and infinities were handled above
    exponent += len(digit_tuple) - len(digits)
    k = len(digits)
    n = exponent + k
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body
