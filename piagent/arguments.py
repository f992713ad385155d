"""Validated JSON arguments to the Python values a function's type hints name.

:func:`converter_for` compiles a hint once into a function applied to every call's value:
dicts become dataclass instances (recursively, through lists, dicts, unions and Optional),
Enum values become members, JSON integers become ``float`` where the hint says ``float``,
lists become tuples/sets where the hint says so. Values are assumed to have passed the
hint's schema already; a converter never validates, it only reshapes.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Optional

from typing_extensions import get_args, get_origin, is_typeddict

from .exceptions import InvalidTypeError, InvalidValueError
from .schema import (
    ARRAY_ORIGINS,
    MAPPING_ORIGINS,
    SET_ORIGINS,
    STRING_TYPES,
    is_dataclass_type,
    object_fields,
    string_type_name,
    type_schema,
    union_members,
    unwrap,
)

__all__ = ["Converter", "converter_for"]

Converter = Callable[[Any], Any]
"""Turns one JSON value into its Python form."""


def converter_for(hint: Any) -> Optional[Converter]:
    """The converter for ``hint``, or None when the JSON value is already the right one."""
    return _converter(hint, ())


def _converter(hint: Any, seen: tuple[type, ...]) -> Optional[Converter]:
    hint, _ = unwrap(hint)
    if hint is float:
        return _to_float
    string_type = string_type_name(hint)
    if string_type:
        return _from_string(hint, string_type)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if is_dataclass_type(hint) or is_typeddict(hint):
        return _object_converter(hint, seen)
    members = union_members(hint)
    if members is not None:
        return _union_converter(members, seen)
    origin = get_origin(hint)
    args = get_args(hint)
    if hint is tuple:
        return tuple
    if hint in SET_ORIGINS:
        return frozenset if hint is frozenset else set
    if origin in ARRAY_ORIGINS or origin in SET_ORIGINS or origin is tuple:
        item = _converter(args[0], seen) if args else None
        container: Callable[[Any], Any] = list
        if origin is tuple:
            container = tuple
        elif origin in SET_ORIGINS:
            container = frozenset if origin is frozenset else set
        if item is None:
            return None if container is list else container
        convert_item = item
        return lambda value: container(convert_item(v) for v in value)
    if origin in MAPPING_ORIGINS and len(args) == 2:
        item = _converter(args[1], seen)
        if item is None:
            return None
        return lambda value: {k: item(v) for k, v in value.items()}
    return None


def _from_string(cls: Any, name: str) -> Converter:
    """A string (or, for Decimal, a number) to ``cls``; ValueError says what was expected."""
    if name.startswith("datetime."):
        parse = cls.fromisoformat
        expected = f"an ISO 8601 {STRING_TYPES[name]['format']}"
    else:
        parse = cls
        expected = "a decimal number" if name == "decimal.Decimal" else f"a {cls.__name__}"

    def convert(value: Any) -> Any:
        text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if isinstance(text, str) and name.startswith("datetime.") and text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"  # fromisoformat() before Python 3.11 refuses "Z"
        try:
            return parse(text)
        except (ValueError, TypeError, ArithmeticError):
            raise InvalidValueError(f"expected {expected}, got {value!r}") from None

    return convert


def _to_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _object_converter(cls: type, seen: tuple[type, ...]) -> Converter:
    if cls in seen:
        raise InvalidTypeError(f"recursive type {cls.__qualname__} is not supported in a tool schema")
    fields: dict[str, Optional[Converter]] = {f.name: _converter(f.hint, seen + (cls,)) for f in object_fields(cls)}
    build: Callable[..., Any] = dict if is_typeddict(cls) else cls

    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        kwargs = {}
        for key, item in value.items():
            field_converter = fields.get(key)
            kwargs[key] = field_converter(item) if field_converter is not None else item
        return build(**kwargs)

    return convert


def _union_converter(members: tuple[Any, ...], seen: tuple[type, ...]) -> Optional[Converter]:
    """Convert with the first member whose schema the value satisfies (None stays None)."""
    from jsonschema import Draft202012Validator  # on first use: keeps ``import piagent`` fast

    options: list[tuple[Any, Converter]] = []
    plain = True
    for member in members:
        if member is type(None):
            continue
        convert = _converter(member, seen)
        if convert is None:
            convert = _identity
        else:
            plain = False
        options.append((Draft202012Validator(type_schema(member)), convert))
    if plain:
        return None
    if len(options) == 1:
        only = options[0][1]
        return lambda value: None if value is None else only(value)

    def convert_union(value: Any) -> Any:
        if value is None:
            return None
        for validator, convert in options:
            if validator.is_valid(value):
                return convert(value)
        return value

    return convert_union


def _identity(value: Any) -> Any:
    return value
