"""Tool-argument validation and coercion (docs/llm.md#tool-arguments; the cases of pi-ai's validation tests)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from piagent.ai import validation
from piagent.ai.validation import coerce_value, validate_tool_arguments
from piagent.exceptions import ToolArgumentsError


def tool(parameters: Any, name: str = "calc") -> Any:
    return SimpleNamespace(name=name, parameters=parameters)


def call(arguments: Any) -> Any:
    return SimpleNamespace(id="call-1", name="calc", arguments=arguments)


def validate(prop_schema: dict[str, Any], value: Any) -> Any:
    """Validate ``{"v": value}`` against an object schema whose property ``v`` is ``prop_schema``."""
    schema = {"type": "object", "properties": {"v": prop_schema}, "required": ["v"]}
    return validate_tool_arguments(tool(schema), call({"v": value}))["v"]


def same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b)


# --------------------------------------------------------------------------- V1, V2: coercions


def test_number_property_accepts_numeric_string():  # V1
    schema = {"type": "object", "properties": {"count": {"type": "number"}}, "required": ["count"]}
    assert same(validate_tool_arguments(tool(schema), call({"count": "42"})), {"count": 42})


@pytest.mark.parametrize(
    "prop, given, expected",
    [
        ({"type": "number"}, "42", 42),
        ({"type": "number"}, True, 1),
        ({"type": "number"}, False, 0),
        ({"type": "number"}, None, 0),
        ({"type": "integer"}, "42", 42),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "false", False),
        ({"type": "boolean"}, 1, True),
        ({"type": "boolean"}, 0, False),
        ({"type": "string"}, None, ""),
        ({"type": "string"}, True, "true"),
        ({"type": "null"}, "", None),
        ({"type": "null"}, 0, None),
        ({"type": "null"}, False, None),
    ],
)
def test_scalar_is_coerced_to_declared_type(prop, given, expected):  # V2
    assert same(validate(prop, given), expected)


def test_union_with_string_keeps_string_that_already_matches():  # V2
    assert same(validate({"type": ["number", "string"]}, "1"), "1")


def test_union_without_match_takes_first_type_that_converts():  # V2
    assert same(validate({"type": ["boolean", "number"]}, "1"), 1)


# --------------------------------------------------------------------------- V3: rejections


@pytest.mark.parametrize("given", ["1", "0"])
def test_boolean_is_not_coerced_from_string_one_or_zero(given):  # V3
    with pytest.raises(ToolArgumentsError, match="Validation failed"):
        validate({"type": "boolean"}, given)


def test_null_is_not_coerced_from_string_null():  # V3
    with pytest.raises(ToolArgumentsError, match="Validation failed"):
        validate({"type": "null"}, "null")


def test_integer_is_not_coerced_from_decimal_string():  # V3
    with pytest.raises(ToolArgumentsError, match="Validation failed"):
        validate({"type": "integer"}, "42.1")


# --------------------------------------------------------------------------- conversion details


@pytest.mark.parametrize(
    "given, expected",
    [(" 42 ", 42), ("-3", -3), ("+7", 7), ("1e3", 1000.0), ("2.5", 2.5), (".5", 0.5), ("5.", 5.0), ("0x10", 16)],
)
def test_number_coercion_reads_javascript_numeric_strings(given, expected):
    assert same(validate({"type": "number"}, given), expected)


@pytest.mark.parametrize("given", ["", "   ", "abc", "1e999", "NaN", "Infinity", "1_000", "12px"])
def test_number_coercion_rejects_blank_non_numeric_and_non_finite_strings(given):
    with pytest.raises(ToolArgumentsError):
        validate({"type": "number"}, given)


@pytest.mark.parametrize("given, expected", [("1e3", 1000), ("42.0", 42), ("-5", -5), (None, 0), (True, 1), (False, 0)])
def test_integer_coercion_accepts_integral_values(given, expected):
    assert same(validate({"type": "integer"}, given), expected)


def test_boolean_is_coerced_from_null():
    assert validate({"type": "boolean"}, None) is False


@pytest.mark.parametrize("given", ["True", "TRUE", "yes", 2, -1])
def test_boolean_coercion_accepts_only_exact_spellings_and_one_or_zero(given):
    with pytest.raises(ToolArgumentsError):
        validate({"type": "boolean"}, given)


@pytest.mark.parametrize(
    "given, expected",
    [
        (1.0, "1"),
        (1.5, "1.5"),
        (100, "100"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (False, "false"),
        (0.1 + 0.2, "0.30000000000000004"),
    ],
)
def test_string_coercion_uses_javascript_spelling(given, expected):
    assert validate({"type": "string"}, given) == expected


@pytest.mark.parametrize("given", ["null", "0", [], {}])
def test_null_is_coerced_only_from_empty_string_zero_and_false(given):
    with pytest.raises(ToolArgumentsError):
        validate({"type": "null"}, given)


def test_null_is_coerced_from_float_zero():
    assert validate({"type": "null"}, 0.0) is None


def test_json_true_does_not_match_integer_or_number_in_a_union():
    assert same(validate({"type": ["integer", "string"]}, True), 1)
    assert same(validate({"type": ["number", "string"]}, False), 0)


def test_boolean_already_matching_a_union_is_kept():
    assert validate({"type": ["boolean", "integer"]}, True) is True


def test_integral_float_matches_integer_in_a_union():
    assert same(validate({"type": ["integer", "string"]}, 3.0), 3.0)


def test_unknown_type_is_left_unchanged():
    assert validate({"type": ["object"]}, {"a": 1}) == {"a": 1}
    with pytest.raises(ToolArgumentsError):
        validate({"type": "array"}, "1")


# --------------------------------------------------------------------------- structure


def test_object_properties_are_coerced_recursively():
    schema = {
        "type": "object",
        "properties": {"outer": {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}},
    }
    result = validate_tool_arguments(tool(schema), call({"outer": {"n": "7", "s": 7, "other": "7"}}))
    assert same(result, {"outer": {"n": 7, "s": "7", "other": "7"}})


def test_properties_are_not_coerced_without_object_type():
    schema = {"properties": {"n": {"type": "integer"}}}
    assert same(coerce_value({"n": "7"}, schema), {"n": "7"})
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(tool(schema), call({"n": "7"}))


def test_additional_properties_schema_coerces_every_extra_key():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": {"type": "number"}}
    result = validate_tool_arguments(tool(schema), call({"name": 1, "x": "1.5", "y": "2"}))
    assert same(result, {"name": "1", "x": 1.5, "y": 2})


def test_boolean_additional_properties_coerces_nothing():
    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    assert same(validate_tool_arguments(tool(schema), call({"x": "1"})), {"x": "1"})


def test_single_items_schema_coerces_every_element():
    schema = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}}
    assert same(validate_tool_arguments(tool(schema), call({"ids": ["1", 2, "3"]})), {"ids": [1, 2, 3]})


def test_tuple_items_coerce_by_position_and_leave_the_rest_untouched():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}},
    }
    result = validate_tool_arguments(tool(schema), call({"pair": ["1", 2, "3", 4]}))
    assert same(result, {"pair": [1, "2", "3", 4]})


def test_nested_coercion_in_arrays_of_objects():
    schema = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "number"}, "flag": {"type": "boolean"}}},
            }
        },
    }
    result = validate_tool_arguments(tool(schema), call({"rows": [{"n": "1", "flag": "true"}, {"n": None, "flag": 0}]}))
    assert same(result, {"rows": [{"n": 1, "flag": True}, {"n": 0, "flag": False}]})


def test_any_of_keeps_first_alternative_that_validates():
    prop = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert same(validate(prop, "42"), 42)
    assert same(validate(prop, "abc"), "abc")


def test_null_for_an_optional_string_becomes_empty_as_pi_makes_it():
    """pydantic's ``Optional[str]`` (an MCP tool's, say) is ``anyOf: [string, null]``: the first
    alternative coerces null to "", as AJV's ``coerceTypes`` does for pi. A type list keeps null."""
    assert same(validate({"anyOf": [{"type": "string"}, {"type": "null"}]}, None), "")
    assert same(validate({"type": ["string", "null"]}, None), None)


def test_one_of_is_coerced_like_any_of():
    assert same(validate({"oneOf": [{"type": "null"}, {"type": "number"}]}, ""), None)


def test_any_of_without_a_valid_alternative_keeps_the_value():
    prop = {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}
    with pytest.raises(ToolArgumentsError) as info:
        validate(prop, "4.5")
    assert "'4.5' is not valid under any of the given schemas" in str(info.value)


def test_any_of_alternative_is_coerced_on_a_copy():
    prop = {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["b"]},
            {"type": "object"},
        ]
    }
    assert same(validate(prop, {"a": "1"}), {"a": "1"})


def test_nested_coercion_inside_any_of_alternatives():
    prop = {"anyOf": [{"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}]}
    assert same(validate(prop, [{"n": "1"}, {"n": "2"}]), [{"n": 1}, {"n": 2}])


def test_any_of_alternatives_resolve_refs_against_the_root_schema():
    schema = {
        "$defs": {"count": {"type": "integer"}},
        "type": "object",
        "properties": {"v": {"anyOf": [{"$ref": "#/$defs/count"}, {"type": "boolean"}]}},
    }
    assert validate_tool_arguments(tool(schema), call({"v": 3})) == {"v": 3}
    assert validate_tool_arguments(tool(schema), call({"v": "true"})) == {"v": True}  # $ref is not coerced through


def test_all_of_applies_each_subschema_in_order():
    assert same(coerce_value(True, {"allOf": [{"type": "number"}, {"type": "string"}]}), "1")  # True -> 1 -> "1"
    assert same(coerce_value(None, {"allOf": [{"type": "string"}, {"type": "number"}]}), "")  # "" is not numeric
    prop = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {"type": "object", "properties": {"b": {"type": "boolean"}}},
        ]
    }
    assert same(validate(prop, {"a": "1", "b": "false"}), {"a": 1, "b": False})


def test_coerce_value_mutates_dicts_and_lists_in_place():
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}}}}
    value = {"xs": ["1", "2"]}
    xs = value["xs"]
    assert coerce_value(value, schema) is value
    assert xs == [1, 2] and value["xs"] is xs


def test_coerce_value_returns_replacement_for_scalars():
    assert same(coerce_value("5", {"type": "integer"}), 5)
    assert coerce_value("x", True) == "x"


# --------------------------------------------------------------------------- top-level replacement quirk


def test_coerced_top_level_dict_replaces_contents_of_the_copy():
    schema = {"anyOf": [{"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}]}
    original = {"n": "1"}
    result = validate_tool_arguments(tool(schema), call(original))
    assert same(result, {"n": 1})
    assert original == {"n": "1"} and result is not original


def test_replaced_top_level_value_is_returned_when_it_validates():
    assert same(validate_tool_arguments(tool({"type": "number"}), call("42")), 42)


def test_replaced_top_level_value_that_fails_returns_args_without_raising():
    assert validate_tool_arguments(tool({"type": "integer", "minimum": 100}), call("42")) == "42"


# --------------------------------------------------------------------------- copies


def test_validated_arguments_are_a_deep_copy_and_caller_dict_is_not_mutated():
    schema = {"type": "object", "properties": {"inner": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    original = {"inner": {"n": "5"}, "keep": [1]}
    snapshot = copy.deepcopy(original)
    result = validate_tool_arguments(tool(schema), call(original))
    assert original == snapshot
    assert result == {"inner": {"n": 5}, "keep": [1]}
    assert result["inner"] is not original["inner"] and result["keep"] is not original["keep"]


def test_valid_arguments_are_returned_as_a_copy():
    original = {"a": 1}
    result = validate_tool_arguments(tool({"type": "object"}), call(original))
    assert result == original and result is not original


def test_missing_parameters_schema_accepts_any_arguments():
    assert validate_tool_arguments(tool(None), call({"a": 1})) == {"a": 1}


# --------------------------------------------------------------------------- error message frame


def test_error_message_frame_is_exact():
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["count", "label"],
    }
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema, name="counter"), call({"count": "4.5"}))
    assert str(info.value) == (
        'Validation failed for tool "counter":\n'
        "  - count: '4.5' is not of type 'integer'\n"
        "  - label: 'label' is a required property\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "count": "4.5"\n'
        "}"
    )


def test_tool_arguments_error_is_a_value_error():
    with pytest.raises(ValueError):
        validate({"type": "integer"}, "x")


def test_error_path_of_missing_required_property_is_its_name():
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool({"type": "object", "required": ["path"]}), call({}))
    assert "\n  - path: 'path' is a required property\n" in str(info.value)


def test_error_path_of_nested_missing_property_is_dotted():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "required": ["missing"]}}}},
    }
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema), call({"a": {"b": {}}}))
    assert "\n  - a.b.missing: 'missing' is a required property\n" in str(info.value)


def test_error_path_includes_array_indices():
    schema = {
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {"type": "object", "required": ["id"]}}},
    }
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema), call({"rows": [{"id": 1}, {}]}))
    assert "\n  - rows.1.id: 'id' is a required property\n" in str(info.value)


def test_empty_error_path_is_root():
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool({"type": "object", "maxProperties": 1}), call({"a": 1, "b": 2}))
    assert "\n  - root: " in str(info.value)


def test_error_path_escapes_slash_and_tilde_like_a_json_pointer():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema), call({"a/b~c": "x"}))
    assert "\n  - a~1b~0c: 'x' is not of type 'integer'\n" in str(info.value)


def test_errors_are_sorted_by_path_then_message():
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer", "minimum": 10, "multipleOf": 3}, "a": {"type": "string"}},
        "required": ["z"],
    }
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema), call({"b": 4, "a": [1]}))
    lines = [line for line in str(info.value).splitlines() if line.startswith("  - ")]
    assert lines == [
        "  - a: [1] is not of type 'string'",
        "  - b: 4 is less than the minimum of 10",
        "  - b: 4 is not a multiple of 3",
        "  - z: 'z' is a required property",
    ]


def test_received_arguments_are_the_original_uncoerced_ones_with_non_ascii_kept():
    schema = {"type": "object", "properties": {"n": {"type": "number"}, "ok": {"type": "boolean"}}}
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool(schema), call({"n": "42", "ok": "1", "name": "café"}))
    assert str(info.value).endswith('Received arguments:\n{\n  "n": "42",\n  "ok": "1",\n  "name": "café"\n}')


def test_unknown_validation_error_when_validator_gives_no_details():
    message = validation._failure_message('tool "calc"', [], {"a": 1}, "arguments")
    assert (
        message == 'Validation failed for tool "calc":\nUnknown validation error\n\nReceived arguments:\n{\n  "a": 1\n}'
    )


# --------------------------------------------------------------------------- validators


def test_schema_dialect_comes_from_dollar_schema_with_2020_12_default():
    dependent = {"type": "object", "dependentRequired": {"a": ["b"]}}
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(tool(dependent), call({"a": 1}))  # 2020-12 knows dependentRequired
    draft7 = dict(dependent, **{"$schema": "http://json-schema.org/draft-07/schema#"})
    assert validate_tool_arguments(tool(draft7), call({"a": 1})) == {"a": 1}  # draft-07 does not


def test_validator_is_compiled_once_per_schema_object():
    schema = {"type": "object"}
    assert validation._compiled(schema) is validation._compiled(schema)
    assert validation._compiled(dict(schema)) is not validation._compiled(schema)


def test_validator_cache_ignores_entry_for_a_reused_id(monkeypatch):
    schema = {"type": "object", "required": ["x"]}
    stale = validation._Compiled({"type": "object"})
    monkeypatch.setitem(validation._cache, id(schema), stale)
    assert validation._compiled(schema) is not stale
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(tool(schema), call({}))


def test_validator_cache_is_bounded():
    schemas = [{"type": "object", "title": str(i)} for i in range(validation._CACHE_SIZE + 50)]
    for schema in schemas:
        validation._compiled(schema)
    assert len(validation._cache) <= validation._CACHE_SIZE
