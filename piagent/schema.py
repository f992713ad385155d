"""Type hints to JSON Schema, for tool parameters.

:func:`type_schema` maps one hint; :func:`function_schema` maps a function's parameters into
the object schema a model sees, with descriptions from ``Annotated[T, "text"]`` or from the
``Args:`` section of the docstring (``Annotated`` wins when both are given).

=====================================  ===================================================
hint                                   schema
=====================================  ===================================================
``str`` ``int`` ``float`` ``bool``     ``{"type": "string" | "integer" | "number" | "boolean"}``
``None``                               ``{"type": "null"}``
``Any`` / no hint                      ``{}`` (any JSON value)
``list[T]`` ``Sequence[T]``            ``{"type": "array", "items": T}``
``tuple[T, ...]`` ``set[T]``           the same (``set``/``frozenset`` add ``"uniqueItems": true``)
``dict[str, T]`` ``Mapping[str, T]``   ``{"type": "object", "additionalProperties": T}``
``Literal[...]`` / ``Enum``            ``{"type": ..., "enum": [values]}``
``Optional[T]`` / unions               ``{"type": [...]}`` for plain scalars, else ``{"anyOf": [...]}``
dataclass / ``TypedDict``              ``{"type": "object", "properties": ..., "required": ...,
                                       "additionalProperties": false}``
=====================================  ===================================================

Nested types are written inline (no ``$ref``); a recursive type is refused. In a union
``null`` is always the last alternative, so that argument coercion never turns ``0`` or
``""`` into None. Defaults that are JSON values appear as ``"default"``.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import enum
import inspect
import json
import sys
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import typing_extensions
from typing_extensions import get_args, get_origin, is_typeddict

from .docstrings import parse_docstring
from .exceptions import InvalidTypeError

__all__ = [
    "ARRAY_ORIGINS",
    "MAPPING_ORIGINS",
    "SET_ORIGINS",
    "STRING_TYPES",
    "FunctionSchema",
    "Parameter",
    "function_schema",
    "is_dataclass_type",
    "jsonable",
    "string_type_name",
    "object_fields",
    "resolve_hints",
    "type_schema",
    "union_members",
    "unwrap",
]

INJECTED = ("signal", "on_update")
"""Parameter names filled in by piagent at call time and hidden from the model."""

_NONE = type(None)


def _special_forms(name: str) -> set:
    """``typing.<name>`` and ``typing_extensions.<name>`` (they differ on some versions)."""
    return {getattr(module, name) for module in (typing, typing_extensions) if hasattr(module, name)}


_LITERALS = _special_forms("Literal")
_ANNOTATED = _special_forms("Annotated")
_REQUIRED = _special_forms("Required")
_NOT_REQUIRED = _special_forms("NotRequired")
_WRAPPERS = _REQUIRED | _NOT_REQUIRED | _special_forms("ReadOnly")
_UNIONS: set = {typing.Union}
if sys.version_info >= (3, 10):
    import types

    _UNIONS.add(types.UnionType)
# Origins of the collection hints: what get_origin() gives for list[int], Sequence[int]...
ARRAY_ORIGINS = {
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
SET_ORIGINS = {set, frozenset, collections.abc.Set, collections.abc.MutableSet}
MAPPING_ORIGINS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string", _NONE: "null"}
#: Python types sent as JSON strings, by qualified name (so that ``import piagent`` imports
#: none of their modules): their schema, with a JSON Schema ``format`` where one exists.
#: Arguments are converted back on the way in (:mod:`piagent.arguments`), values to strings
#: on the way out (:func:`jsonable`).
STRING_TYPES: dict[str, dict[str, Any]] = {
    "datetime.datetime": {"type": "string", "format": "date-time"},
    "datetime.date": {"type": "string", "format": "date"},
    "datetime.time": {"type": "string", "format": "time"},
    "uuid.UUID": {"type": "string", "format": "uuid"},
    "decimal.Decimal": {"type": "string", "description": 'a decimal number, e.g. "12.50"'},
    "pathlib.Path": {"type": "string", "description": "a file system path"},
    "pathlib.PurePath": {"type": "string", "description": "a file system path"},
}


def string_type_name(hint: Any) -> Optional[str]:
    """The :data:`STRING_TYPES` key of ``hint``, or None."""
    if not isinstance(hint, type):
        return None
    name = _qualified(hint)
    return name if name in STRING_TYPES else None


def _qualified(cls: type) -> str:
    return f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"  # pathlib._local.Path is pathlib.Path


def _string_form(value: Any) -> Optional[str]:
    for cls in type(value).__mro__:
        if _qualified(cls) in STRING_TYPES:
            return value.isoformat() if cls.__module__ == "datetime" else str(value)
    return None


# --------------------------------------------------------------------------- hint inspection


def unwrap(hint: Any) -> tuple[Any, Optional[str]]:
    """Strip ``Annotated`` (keeping its first string as a description) and ``Required``/``NotRequired``."""
    description: Optional[str] = None
    while True:
        origin = get_origin(hint)
        if origin in _ANNOTATED:
            args = get_args(hint)
            if description is None:
                description = next((m for m in args[1:] if isinstance(m, str)), None)
            hint = args[0]
        elif origin in _WRAPPERS:
            hint = get_args(hint)[0]
        else:
            return hint, description


def union_members(hint: Any) -> Optional[tuple[Any, ...]]:
    """The members of a union (``Optional[X]``, ``Union[X, Y]``, ``X | Y``), else None."""
    return get_args(hint) if get_origin(hint) in _UNIONS else None


def is_dataclass_type(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def resolve_hints(obj: Any, owner: str) -> dict[str, Any]:
    """``get_type_hints(obj, include_extras=True)``, with a clear error when a name is unknown."""
    try:
        return typing_extensions.get_type_hints(obj, include_extras=True)
    except Exception as exc:
        raise InvalidTypeError(
            f"cannot resolve the type hints of {owner}: {exc} "
            "(types named in hints must be importable from the module that defines them)"
        ) from exc


@dataclass
class Field:
    """One property of a dataclass or TypedDict."""

    name: str
    hint: Any
    required: bool
    default: Any = inspect.Parameter.empty
    """The field's default value; ``inspect.Parameter.empty`` when it has none (or a factory)."""


def object_fields(cls: type) -> list[Field]:
    """The init fields of a dataclass, or the keys of a TypedDict, in definition order."""
    hints = resolve_hints(cls, f"{cls.__qualname__}")
    if is_typeddict(cls):
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset(hints))
        return [Field(name, hint, _key_required(hint, name in required_keys)) for name, hint in hints.items()]
    result = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        result.append(Field(f.name, hints.get(f.name, Any), not has_default, default))
    return result


def _key_required(hint: Any, default: bool) -> bool:
    """A TypedDict key's requiredness: an explicit ``Required``/``NotRequired`` wins.

    (With string annotations the class itself cannot see these wrappers, so they are read
    from the resolved hint.)
    """
    while True:
        origin = get_origin(hint)
        if origin in _ANNOTATED:
            hint = get_args(hint)[0]
        elif origin in _NOT_REQUIRED:
            return False
        elif origin in _REQUIRED:
            return True
        elif origin in _WRAPPERS:
            hint = get_args(hint)[0]
        else:
            return default


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dataclasses become dicts, Enums their values, tuples lists,
    dates and times ISO 8601 strings, UUIDs, Decimals and paths strings.

    Raises TypeError naming the first type that has no JSON form.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    text = _string_form(value)
    if text is not None:
        return text
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, enum.Enum):
                key = key.value
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise InvalidTypeError(f"a dict key of type {type(key).__name__} has no JSON form")
            out[key if isinstance(key, str) else json.dumps(key)] = jsonable(item)
        return out
    raise InvalidTypeError(f"a value of type {type(value).__name__} has no JSON form")


# --------------------------------------------------------------------------- hints -> schema


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint; TypeError for a hint with no JSON form."""
    return _schema(hint, ())


def _schema(hint: Any, seen: tuple[type, ...]) -> dict[str, Any]:
    hint, description = unwrap(hint)
    schema = _bare_schema(hint, seen)
    if description:
        schema = {**schema, "description": description}
    return schema


def _bare_schema(hint: Any, seen: tuple[type, ...]) -> dict[str, Any]:
    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return {}
    if hint is None:
        hint = _NONE
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    string_type = string_type_name(hint)
    if string_type:
        return dict(STRING_TYPES[string_type])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint])
    if is_dataclass_type(hint) or is_typeddict(hint):
        return _object_schema(hint, seen)
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in _LITERALS:
        return _enum_schema([a.value if isinstance(a, enum.Enum) else a for a in args])
    if origin in _UNIONS:
        return _union_schema(args, seen)
    if hint in ARRAY_ORIGINS or hint is tuple or hint in SET_ORIGINS:
        return _array({}, hint in SET_ORIGINS)
    if hint in MAPPING_ORIGINS:
        return {"type": "object"}
    if origin in ARRAY_ORIGINS or origin in SET_ORIGINS:
        return _array(_schema(args[0], seen) if args else {}, origin in SET_ORIGINS)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _array(_schema(args[0], seen), False)
        raise InvalidTypeError(
            f"unsupported type hint {_name(hint)}: use tuple[X, ...] or list[X] "
            "(fixed-length tuples have no portable JSON Schema)"
        )
    if origin in MAPPING_ORIGINS:
        key, value = args if args else (str, Any)
        if unwrap(key)[0] is not str:
            raise InvalidTypeError(
                f"unsupported type hint {_name(hint)}: JSON object keys are strings, use dict[str, ...]"
            )
        value_schema = _schema(value, seen)
        return {"type": "object", "additionalProperties": value_schema} if value_schema else {"type": "object"}
    raise InvalidTypeError(f"unsupported type hint {_name(hint)}: it has no JSON Schema form")


def _array(items: dict[str, Any], unique: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array"}
    if items:
        schema["items"] = items
    if unique:
        schema["uniqueItems"] = True
    return schema


def _enum_schema(values: Sequence[Any]) -> dict[str, Any]:
    values = [jsonable(v) for v in values]
    kinds = {_json_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    schema: dict[str, Any] = {}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    elif kinds:
        schema["type"] = sorted(kinds)
    schema["enum"] = list(values)
    return schema


def _json_type(value: Any) -> str:
    for python_type, name in _SCALARS.items():
        if isinstance(value, python_type):
            return name
    return "object"


def _union_schema(members: Sequence[Any], seen: tuple[type, ...]) -> dict[str, Any]:
    schemas = [_schema(m, seen) for m in members if m is not _NONE]
    if len(schemas) < len(members):
        schemas.append({"type": "null"})
    if any(s == {} for s in schemas):
        return {}
    if all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
        return {"type": [s["type"] for s in schemas]}
    return {"anyOf": schemas}


def _object_schema(cls: type, seen: tuple[type, ...]) -> dict[str, Any]:
    if cls in seen:
        raise InvalidTypeError(f"recursive type {cls.__qualname__} is not supported in a tool schema")
    docstring = parse_docstring(_user_doc(cls))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in object_fields(cls):
        properties[f.name] = _property(_schema(f.hint, seen + (cls,)), docstring.params.get(f.name), f.default)
        if f.required:
            required.append(f.name)
    return _object(properties, required, docstring.description, closed=True)


def _user_doc(cls: type) -> Optional[str]:
    """The class docstring, unless it is the one ``@dataclass`` generates (``Name(a: int)``)."""
    doc = cls.__doc__
    if doc and is_dataclass_type(cls) and doc.startswith(f"{cls.__name__}("):
        return None
    return doc


def _property(schema: dict[str, Any], description: Optional[str], default: Any) -> dict[str, Any]:
    schema = dict(schema)
    if description and "description" not in schema:
        schema["description"] = description
    if default is not inspect.Parameter.empty:
        with contextlib.suppress(TypeError):  # a default with no JSON form is simply not shown
            schema["default"] = jsonable(default)
    return schema


def _object(properties: dict[str, Any], required: list[str], description: str, closed: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    if closed is True:
        schema["additionalProperties"] = False
    elif isinstance(closed, dict):
        schema["additionalProperties"] = closed
    return schema


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint)


# --------------------------------------------------------------------------- functions


@dataclass
class Parameter:
    """One parameter the model fills in."""

    name: str
    hint: Any
    kind: Any
    default: Any


@dataclass
class FunctionSchema:
    """What a function shows the model, and how to call it.

    ``parameters``: the object schema; ``description``: the docstring's description;
    ``params``: the model-facing parameters in order; ``injected``: names of injected ones;
    ``extra``: the ``**kwargs`` parameter (name, hint) if the function takes one.
    """

    parameters: dict[str, Any]
    description: str
    params: list[Parameter]
    injected: list[str]
    extra: Optional[tuple[str, Any]] = None


def function_schema(fn: Callable[..., Any], owner: str) -> FunctionSchema:
    """Derive the parameter schema of ``fn``; ``owner`` names it in error messages.

    Raises TypeError for ``*args``, for a hint with no JSON form, and for a docstring that
    documents a parameter the function does not have.
    """
    signature = inspect.signature(fn)
    hints = resolve_hints(fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__, owner)
    docstring = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Parameter] = []
    injected: list[str] = []
    extra: Optional[tuple[str, Any]] = None
    extra_schema: dict[str, Any] = {}
    for name, p in signature.parameters.items():
        if name in INJECTED:
            injected.append(name)
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            raise InvalidTypeError(f"{owner}: *{name} is not supported (a model passes named arguments only)")
        hint = hints.get(name, Any)
        try:
            schema = _schema(hint, ())
        except TypeError as exc:
            raise InvalidTypeError(f"{owner}: parameter {name!r}: {exc}") from None
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra, extra_schema = (name, hint), schema
            continue
        properties[name] = _property(schema, docstring.params.get(name), p.default)
        if p.default is inspect.Parameter.empty:
            required.append(name)
        params.append(Parameter(name, hint, p.kind, p.default))
    unknown = [n for n in docstring.params if n not in signature.parameters]
    if unknown:
        raise InvalidTypeError(
            f"{owner}: the docstring documents {', '.join(map(repr, unknown))}, which is not a parameter"
        )
    closed: Any = True if extra is None else (extra_schema or None)
    parameters = _object(properties, required, "", closed)
    return FunctionSchema(parameters, docstring.description, params, injected, extra)
