"""``output_type``: a Python type as the structured output a run must end with.

:func:`output_spec` turns what ``Agent(output_type=...)`` accepts into the loop's
:class:`~piagent.types.OutputSpec` (docs/structured-output.md#output-types):

* anything ``@tool`` accepts as a parameter hint (dataclasses, TypedDicts, ``Literal``,
  ``Enum``, lists, dicts, unions, primitives): the schema from :mod:`piagent.schema`, the
  conversion from :mod:`piagent.arguments`;
* a pydantic model, when pydantic is installed (piagent does not depend on it): its
  ``model_json_schema()`` and ``model_validate()``;
* a ``dict``: a JSON Schema as it is; the output is the validated JSON.

A type whose schema is not an object (``list[str]``, ``Literal["yes", "no"]``...) is asked
for as ``{"value": ...}`` and unwrapped, because most APIs want an object at the root.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Optional

from .ai.alternatives import alternatives_problem
from .ai.nesting import MAX_SCHEMA_DEPTH, check_depth
from .ai.types import OutputFormat
from .arguments import converter_for
from .exceptions import InvalidTypeError, InvalidValueError
from .schema import type_schema, unwrap
from .types import OutputMode, OutputSpec

__all__ = ["DEFAULT_OUTPUT_RETRIES", "check_output_type", "output_spec"]

DEFAULT_OUTPUT_RETRIES = 3
"""Invalid answers the model may correct before the run ends with an error."""

_NAME_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def check_output_type(name: str, value: Any) -> Any:
    """The ``output_type`` option's check: None, or a value :func:`output_spec` accepts."""
    if value is not None:
        output_spec(value)
    return value


def output_spec(output_type: Any, mode: OutputMode = "auto", retries: int = DEFAULT_OUTPUT_RETRIES) -> OutputSpec:
    """The :class:`OutputSpec` of ``output_type``; InvalidTypeError (a TypeError) for a type with no JSON form."""
    if isinstance(output_type, dict):
        schema: dict[str, Any] = _checked_schema(output_type)
        convert: Callable[[Any], Any] = _identity
        name = str(schema.get("title") or "output")
    elif _is_pydantic_model(output_type):
        schema = output_type.model_json_schema()
        convert = output_type.model_validate
        name = output_type.__name__
    else:
        try:
            schema = type_schema(output_type)
        except TypeError as exc:
            raise InvalidTypeError(f"output_type {output_type!r}: {exc}") from None
        convert = converter_for(output_type) or _identity
        bare, _ = unwrap(output_type)
        name = getattr(bare, "__name__", "output") if isinstance(bare, type) else "output"
    wrapped = schema.get("type") != "object"
    if wrapped:
        schema = _wrap(schema)
    description = str(schema.get("description") or "")
    return OutputSpec(OutputFormat(_safe_name(name), schema, description), convert, wrapped, mode, retries)


def _checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.validators import validator_for

    check_depth(schema, "the output_type schema", MAX_SCHEMA_DEPTH)  # jsonschema would hit RecursionError
    problem = alternatives_problem(schema)
    if problem is not None:
        raise InvalidValueError(f"the output_type schema is refused: {problem}")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        raise InvalidValueError(f"output_type is not a valid JSON Schema: {exc.message}") from None
    return dict(schema)


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    defs = inner.pop("$defs", None)  # references stay relative to the root
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
        "additionalProperties": False,
    }
    if defs is not None:
        wrapper["$defs"] = defs
    return wrapper


def _safe_name(name: str) -> str:
    return _NAME_INVALID.sub("_", name)[:64] or "output"


def _identity(value: Any) -> Any:
    return value


def _is_pydantic_model(value: Any) -> bool:
    pydantic: Optional[Any] = sys.modules.get("pydantic")  # a model's class has imported it already
    return pydantic is not None and isinstance(value, type) and issubclass(value, pydantic.BaseModel)
