"""Structured output on the wire: each API's native form of an :class:`OutputFormat`.

docs/structured-output.md#providers lists which form each provider sends. The functions here
are pure: they add the format to a request body a provider has built.

* OpenAI Chat Completions: ``response_format: {type: "json_schema", json_schema: {name,
  schema, strict}}``; OpenAI Responses: ``text.format: {type: "json_schema", name, schema,
  strict}``. ``strict`` is true when :func:`openai_strict_schema` can express the schema in
  the strict subset (every object closed, every property required, optional ones nullable),
  else the schema goes as it is with ``strict: false``.
* Anthropic Messages: ``output_config.format: {type: "json_schema", schema}``, the schema
  reduced by :func:`anthropic_schema` to the keywords the API constrains.
* Gemini: ``generationConfig.responseMimeType: "application/json"`` and
  ``responseJsonSchema`` (full JSON Schema).

:func:`drop_absent_nulls` undoes the one change strict mode makes to the answer: a property
the schema leaves optional comes back as ``null`` instead of being left out.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from .capabilities import NO_THINKING, capabilities_of
from .types import Model, OutputFormat

__all__ = [
    "add_anthropic_output",
    "add_chat_completions_output",
    "add_google_output",
    "add_responses_output",
    "anthropic_schema",
    "drop_absent_nulls",
    "openai_strict_schema",
    "output_mode_for",
    "supports_native_output",
]


def supports_native_output(model: Model) -> bool:
    """True unless ``model.compat["supports_structured_output"]`` is false.

    Every built-in provider has a native form (llama-cpp: a grammar; the llama.cpp family of
    servers: their own ``response_format``, docs/servers.md#structured-output); a server behind
    an OpenAI-compatible URL that lacks ``response_format`` is declared with that compat key.
    Other APIs (the faux provider, custom ones) receive the format in their options.
    """
    declared = (model.compat or {}).get("supports_structured_output")
    if declared is not None:
        return bool(declared)
    return True


def output_mode_for(model: Model, requested: str) -> str:
    """``"native"`` or ``"tool"``: how a call to ``model`` asks for the output (docs/structured-output.md#modes).

    ``"auto"`` is native unless the model has no native form. ``"tool"`` needs a forced tool
    choice: on a model whose capabilities refuse one it is native (where that exists).
    """
    native = supports_native_output(model)
    if requested == "native" or (requested == "auto" and native):
        return "native"
    forced_allowed = capabilities_of(model, NO_THINKING).forced_tool_choice  # learned refusals included
    return "tool" if forced_allowed or not native else "native"


# --------------------------------------------------------------------------- OpenAI

_ANNOTATIONS = ("default", "examples", "$schema", "title")
_OPENAI_DROPPED = _ANNOTATIONS + ("uniqueItems",)  # not in the strict subset; validation still checks it


def openai_strict_schema(schema: dict[str, Any]) -> Optional[dict[str, Any]]:
    """``schema`` in OpenAI's strict subset, or None when it cannot be expressed there.

    Every object gets ``additionalProperties: false`` and lists every property as required; a
    property that was optional becomes nullable (``drop_absent_nulls`` removes the ``null`` the
    model then sends). Not expressible: an object with open additional properties (``dict[str,
    T]``) and a sub-schema without a type (``Any``).
    """
    try:
        return _strict(copy.deepcopy(schema))
    except _NotStrict:
        return None


class _NotStrict(Exception):
    pass


def _strict(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise _NotStrict()
    for key in _OPENAI_DROPPED:
        schema.pop(key, None)
    if "$defs" in schema:  # pydantic's nested models
        schema["$defs"] = {name: _strict(sub) for name, sub in schema["$defs"].items()}
    if not any(key in schema for key in ("type", "anyOf", "enum", "const", "$ref")):
        raise _NotStrict()  # an untyped value
    if "anyOf" in schema:
        schema["anyOf"] = [_strict(s) for s in schema["anyOf"]]
    if "items" in schema:
        schema["items"] = _strict(schema["items"])
    types = schema.get("type")
    if types == "object" or (isinstance(types, list) and "object" in types):
        if schema.get("additionalProperties") not in (None, False):
            raise _NotStrict()
        properties = schema.setdefault("properties", {})
        required = set(schema.get("required", []))
        for name, sub in list(properties.items()):
            sub = _strict(sub)
            properties[name] = sub if name in required else _nullable(sub)
        schema["required"] = list(properties)
        schema["additionalProperties"] = False
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    types = schema.get("type")
    if "enum" in schema:
        if None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        if isinstance(types, str):
            schema["type"] = [types, "null"]
        return schema
    if isinstance(types, str) and types != "null" and "anyOf" not in schema:
        schema["type"] = [types, "null"]
        return schema
    if isinstance(types, list):
        if "null" not in types:
            schema["type"] = [*types, "null"]
        return schema
    if "anyOf" in schema:
        if {"type": "null"} not in schema["anyOf"]:
            schema["anyOf"].append({"type": "null"})
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def _openai_format(output: OutputFormat) -> tuple[dict[str, Any], bool]:
    strict = openai_strict_schema(output.schema)
    return (strict, True) if strict is not None else (output.schema, False)


def add_chat_completions_output(payload: dict[str, Any], output: OutputFormat, form: str = "json_schema") -> None:
    """``response_format`` of ``POST /chat/completions`` in ``form`` (docs/servers.md#structured-output):
    ``"json_schema"`` is OpenAI's; ``"json_object"`` is llama.cpp's ``{type: "json_object",
    schema}``, whose schema the server turns into a grammar (sent whole: no strict subset)."""
    if form == "json_object":
        payload["response_format"] = {"type": "json_object", "schema": output.schema}
        return
    schema, strict = _openai_format(output)
    spec: dict[str, Any] = {"name": output.name, "schema": schema, "strict": strict}
    if output.description:
        spec["description"] = output.description
    payload["response_format"] = {"type": "json_schema", "json_schema": spec}


def add_responses_output(payload: dict[str, Any], output: OutputFormat) -> None:
    """``text.format`` of ``POST /responses`` (other ``text`` settings are kept)."""
    schema, strict = _openai_format(output)
    spec: dict[str, Any] = {"type": "json_schema", "name": output.name, "schema": schema, "strict": strict}
    if output.description:
        spec["description"] = output.description
    payload.setdefault("text", {})["format"] = spec


# --------------------------------------------------------------------------- Anthropic

_ANTHROPIC_KEYWORDS = frozenset(
    {"type", "enum", "const", "anyOf", "allOf", "$ref", "$defs", "description", "properties", "required", "items"}
)
_ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` reduced to what Anthropic's structured outputs constrain.

    Objects are closed (``additionalProperties: false``), a list of types becomes ``anyOf``,
    ``minItems`` is kept when 0 or 1 and ``format`` when the API knows it; any other keyword
    (``minimum``, ``pattern``, ``uniqueItems``...) is written into the description, where the
    model can still read it. The answer is validated against the original schema anyway.
    """
    return _anthropic(copy.deepcopy(schema))


def _anthropic(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    types = schema.get("type")
    if isinstance(types, list) and "enum" not in schema:
        rest = {k: v for k, v in schema.items() if k != "type"}
        return _anthropic({"anyOf": [{**rest, "type": t} for t in types]})
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out[key] = {name: _anthropic(sub) for name, sub in value.items()}
        elif key in ("anyOf", "allOf"):
            out[key] = [_anthropic(sub) for sub in value]
        elif key == "items":
            out[key] = _anthropic(value)
        elif _anthropic_keeps(key, value):
            out[key] = value
        elif key not in ("additionalProperties",) + _ANNOTATIONS:
            extra[key] = value
    if types == "object":
        out["additionalProperties"] = False
    if extra:
        note = "{" + ", ".join(f"{key}: {value}" for key, value in extra.items()) + "}"
        out["description"] = f"{out['description']}\n\n{note}" if out.get("description") else note
    return out


def _anthropic_keeps(key: str, value: Any) -> bool:
    if key == "format":
        return value in _ANTHROPIC_FORMATS
    if key == "minItems":
        return value in (0, 1)
    return key in _ANTHROPIC_KEYWORDS


def add_anthropic_output(payload: dict[str, Any], output: OutputFormat) -> None:
    """``output_config.format`` of ``POST /v1/messages`` (other ``output_config`` keys are kept)."""
    payload.setdefault("output_config", {})["format"] = {
        "type": "json_schema",
        "schema": anthropic_schema(output.schema),
    }


# --------------------------------------------------------------------------- Gemini


def add_google_output(payload: dict[str, Any], output: OutputFormat) -> None:
    """``responseMimeType`` and ``responseJsonSchema`` in ``generationConfig``."""
    config = payload.setdefault("generationConfig", {})
    config["responseMimeType"] = "application/json"
    config["responseJsonSchema"] = {k: v for k, v in output.schema.items() if k != "$schema"}


# --------------------------------------------------------------------------- answers


def drop_absent_nulls(value: Any, schema: Any) -> Any:
    """``value`` without the ``null`` of properties that ``schema`` leaves optional and that do
    not accept null themselves (what a strict-mode answer sends for an absent property).

    Follows ``properties``, ``items`` and ``anyOf`` alternatives that are objects; returns a
    new value, the input is not changed.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [drop_absent_nulls(item, schema["items"]) for item in value]
    if not isinstance(value, dict):
        return value
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        objects = [s for s in schema.get("anyOf") or [] if isinstance(s, dict) and "properties" in s]
        return drop_absent_nulls(value, objects[0]) if len(objects) == 1 else value
    required = set(schema.get("required") or [])
    out = {}
    for key, item in value.items():
        sub = properties.get(key)
        if item is None and key not in required and isinstance(sub, dict) and not _accepts_null(sub):
            continue
        out[key] = drop_absent_nulls(item, sub)
    return out


def _accepts_null(schema: dict[str, Any]) -> bool:
    if not schema:
        return True
    types = schema.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    if None in (schema.get("enum") or []):
        return True
    return any(isinstance(s, dict) and _accepts_null(s) for s in schema.get("anyOf") or [])
