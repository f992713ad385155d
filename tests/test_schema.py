"""Type hints -> JSON Schema (piagent.schema), one test per hint form, exact schemas."""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional, Union

import pytest
from typing_extensions import Literal, NotRequired, Required, TypedDict

from piagent.schema import function_schema, jsonable, type_schema

py310 = pytest.mark.skipif(sys.version_info < (3, 10), reason="X | Y and list[int] need Python 3.10+")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    x: float
    y: float = 0.0


@dataclass
class Shape:
    """A named polygon.

    Attributes:
        name: What to call it.
        points: Corners, in order.
    """

    name: str
    points: list[Point]
    color: Optional[Color] = None
    tags: list[str] = field(default_factory=list)


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Partial(TypedDict, total=False):
    id: Required[str]
    note: str


@dataclass
class Node:
    value: int
    children: list[Node]


class TestScalars:
    @pytest.mark.parametrize(
        "hint, expected",
        [
            (int, {"type": "integer"}),
            (float, {"type": "number"}),
            (str, {"type": "string"}),
            (bool, {"type": "boolean"}),
            (type(None), {"type": "null"}),
            (None, {"type": "null"}),
            (Any, {}),
        ],
    )
    def test_scalar_hints_map_to_json_types(self, hint: Any, expected: dict) -> None:
        assert type_schema(hint) == expected


class TestCollections:
    def test_list_of_int_is_an_array_of_integers(self) -> None:
        assert type_schema(list[int]) == {"type": "array", "items": {"type": "integer"}}

    def test_bare_list_and_dict_have_no_item_schema(self) -> None:
        assert type_schema(list) == {"type": "array"}
        assert type_schema(list) == {"type": "array"}
        assert type_schema(dict) == {"type": "object"}
        assert type_schema(dict) == {"type": "object"}

    def test_sequence_and_homogeneous_tuple_are_arrays(self) -> None:
        assert type_schema(Sequence[str]) == {"type": "array", "items": {"type": "string"}}
        assert type_schema(tuple[int, ...]) == {"type": "array", "items": {"type": "integer"}}

    def test_sets_are_arrays_of_unique_items(self) -> None:
        expected = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
        assert type_schema(set[str]) == expected
        assert type_schema(frozenset[str]) == expected

    def test_dict_of_str_is_an_object_with_additional_properties(self) -> None:
        assert type_schema(dict[str, float]) == {"type": "object", "additionalProperties": {"type": "number"}}
        assert type_schema(Mapping[str, Any]) == {"type": "object"}

    def test_dict_with_non_string_keys_is_refused(self) -> None:
        with pytest.raises(TypeError, match="keys are strings"):
            type_schema(dict[int, str])

    def test_fixed_length_tuple_is_refused_with_advice(self) -> None:
        with pytest.raises(TypeError, match=r"tuple\[X, \.\.\.\]"):
            type_schema(tuple[int, str])

    def test_nested_collections(self) -> None:
        assert type_schema(list[dict[str, list[int]]]) == {
            "type": "array",
            "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
        }


class TestUnions:
    def test_optional_scalar_is_a_type_list_with_null_last(self) -> None:
        assert type_schema(Optional[str]) == {"type": ["string", "null"]}

    def test_union_of_scalars_is_a_type_list(self) -> None:
        assert type_schema(Union[int, str]) == {"type": ["integer", "string"]}

    def test_null_moves_last_so_coercion_never_turns_zero_into_none(self) -> None:
        assert type_schema(Union[None, int]) == {"type": ["integer", "null"]}
        assert type_schema(Union[None, list[int]]) == {
            "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
        }

    def test_union_with_a_compound_member_is_any_of(self) -> None:
        assert type_schema(Union[Point, int]) == {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
                    "required": ["x"],
                    "additionalProperties": False,
                },
                {"type": "integer"},
            ]
        }

    def test_union_with_any_accepts_anything(self) -> None:
        assert type_schema(Optional[Any]) == {}

    @py310
    def test_pipe_union_matches_optional(self) -> None:
        assert type_schema(eval("int | None")) == {"type": ["integer", "null"]}
        assert type_schema(eval("list[int] | str")) == {
            "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]
        }


class TestEnumerations:
    def test_literal_of_strings(self) -> None:
        assert type_schema(Literal["a", "b"]) == {"type": "string", "enum": ["a", "b"]}

    def test_literal_of_ints_and_of_mixed_values(self) -> None:
        assert type_schema(Literal[1, 2]) == {"type": "integer", "enum": [1, 2]}
        assert type_schema(Literal["auto", 0]) == {"type": ["integer", "string"], "enum": ["auto", 0]}

    def test_string_enum_uses_member_values(self) -> None:
        assert type_schema(Color) == {"type": "string", "enum": ["red", "green"]}

    def test_int_enum_uses_member_values(self) -> None:
        assert type_schema(Level) == {"type": "integer", "enum": [1, 2]}


class TestObjects:
    def test_dataclass_is_a_closed_object_with_required_fields_and_defaults(self) -> None:
        assert type_schema(Point) == {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
            "required": ["x"],
            "additionalProperties": False,
        }

    def test_nested_dataclass_with_docstring_attributes(self) -> None:
        point = type_schema(Point)
        assert type_schema(Shape) == {
            "type": "object",
            "description": "A named polygon.",
            "properties": {
                "name": {"type": "string", "description": "What to call it."},
                "points": {"type": "array", "items": point, "description": "Corners, in order."},
                "color": {"anyOf": [{"type": "string", "enum": ["red", "green"]}, {"type": "null"}], "default": None},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name", "points"],
            "additionalProperties": False,
        }

    def test_typed_dict_required_keys_follow_not_required(self) -> None:
        assert type_schema(Movie) == {
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title"],
            "additionalProperties": False,
        }

    def test_typed_dict_total_false_with_required_key(self) -> None:
        assert type_schema(Partial) == {
            "type": "object",
            "properties": {"id": {"type": "string"}, "note": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        }

    def test_recursive_type_is_refused(self) -> None:
        with pytest.raises(TypeError, match="recursive type Node"):
            type_schema(Node)


class TestAnnotated:
    def test_annotated_string_becomes_the_description(self) -> None:
        assert type_schema(Annotated[int, "How many."]) == {"type": "integer", "description": "How many."}

    def test_annotated_ignores_non_string_metadata(self) -> None:
        assert type_schema(Annotated[list[str], 42, "Names."]) == {
            "type": "array",
            "items": {"type": "string"},
            "description": "Names.",
        }

    def test_annotated_inside_containers(self) -> None:
        assert type_schema(Optional[list[Annotated[int, "An id."]]]) == {
            "anyOf": [{"type": "array", "items": {"type": "integer", "description": "An id."}}, {"type": "null"}]
        }


class TestUnsupported:
    def test_arbitrary_class_is_refused_with_its_name(self) -> None:
        class Opaque:
            pass

        with pytest.raises(TypeError, match="unsupported type hint Opaque"):
            type_schema(Opaque)


# --------------------------------------------------------------------------- functions


def search(
    query: str,
    limit: int = 10,
    exact: bool = False,
    kinds: Optional[list[Literal["file", "dir"]]] = None,
    signal: Any = None,
    on_update: Any = None,
) -> str:
    """Search the index.

    Args:
        query: What to look for.
        limit: At most this many hits.
    """
    return ""


class TestFunctionSchema:
    def test_parameters_required_defaults_and_descriptions(self) -> None:
        derived = function_schema(search, "tool 'search'")
        assert derived.description == "Search the index."
        assert derived.parameters == {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "description": "At most this many hits.", "default": 10},
                "exact": {"type": "boolean", "default": False},
                "kinds": {
                    "anyOf": [
                        {"type": "array", "items": {"type": "string", "enum": ["file", "dir"]}},
                        {"type": "null"},
                    ],
                    "default": None,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    def test_signal_and_on_update_are_injected_not_shown(self) -> None:
        derived = function_schema(search, "tool 'search'")
        assert derived.injected == ["signal", "on_update"]
        assert "signal" not in derived.parameters["properties"]
        assert "on_update" not in derived.parameters["properties"]

    def test_function_without_parameters(self) -> None:
        def ping() -> str:
            return "pong"

        assert function_schema(ping, "tool 'ping'").parameters == {
            "type": "object",
            "properties": {},
            "additionalProperties": False,
        }

    def test_unannotated_parameter_accepts_any_json(self) -> None:
        def f(x):  # type: ignore[no-untyped-def]
            return x

        assert function_schema(f, "tool 'f'").parameters["properties"] == {"x": {}}

    def test_annotated_description_wins_over_docstring(self) -> None:
        def f(x: Annotated[int, "From the hint."]) -> None:
            """F.

            Args:
                x: From the docstring.
            """

        assert function_schema(f, "tool 'f'").parameters["properties"]["x"] == {
            "type": "integer",
            "description": "From the hint.",
        }

    def test_var_keyword_opens_additional_properties_with_its_hint(self) -> None:
        def f(name: str, **labels: int) -> None:
            pass

        assert function_schema(f, "tool 'f'").parameters == {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": {"type": "integer"},
        }

    def test_var_positional_is_refused(self) -> None:
        def f(*items: int) -> None:
            pass

        with pytest.raises(TypeError, match=r"\*items is not supported"):
            function_schema(f, "tool 'f'")

    def test_unsupported_hint_names_the_parameter(self) -> None:
        def f(when: complex) -> None:
            pass

        with pytest.raises(TypeError, match="tool 'f': parameter 'when': unsupported type hint complex"):
            function_schema(f, "tool 'f'")

    def test_docstring_naming_a_missing_parameter_is_refused(self) -> None:
        def f(x: int) -> None:
            """F.

            Args:
                y: Not a parameter.
            """

        with pytest.raises(TypeError, match="documents 'y', which is not a parameter"):
            function_schema(f, "tool 'f'")

    def test_unresolvable_string_annotation_is_a_clear_error(self) -> None:
        def f(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821 -- the undefined name is the test
            pass

        with pytest.raises(TypeError, match="cannot resolve the type hints of tool 'f'.*NotDefinedAnywhere"):
            function_schema(f, "tool 'f'")

    def test_string_annotations_resolve_through_module_globals(self) -> None:
        # this module uses `from __future__ import annotations`: every hint here is a string
        def f(shape: Shape, level: Level) -> None:
            pass

        assert f.__annotations__["shape"] == "Shape"
        properties = function_schema(f, "tool 'f'").parameters["properties"]
        assert properties["shape"] == type_schema(Shape)
        assert properties["level"] == {"type": "integer", "enum": [1, 2]}

    def test_runtime_annotations_without_future_import(self) -> None:
        namespace: dict[str, Any] = {}
        exec(
            "from typing import List, Optional\ndef f(ids: List[int], note: Optional[str] = None) -> None:\n    pass\n",
            namespace,
        )
        assert function_schema(namespace["f"], "tool 'f'").parameters["properties"] == {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "note": {"type": ["string", "null"], "default": None},
        }

    @py310
    def test_builtin_generics_and_pipe_unions_in_string_annotations(self) -> None:
        def f(ids: list[int], names: dict[str, str] | None, level: int | None = None) -> None:
            pass

        assert function_schema(f, "tool 'f'").parameters == {
            "type": "object",
            "properties": {
                "ids": {"type": "array", "items": {"type": "integer"}},
                "names": {"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "null"}]},
                "level": {"type": ["integer", "null"], "default": None},
            },
            "required": ["ids", "names"],
            "additionalProperties": False,
        }

    def test_default_without_json_form_is_left_out(self) -> None:
        marker = object()

        def f(x: Any = marker) -> None:
            pass

        assert function_schema(f, "tool 'f'").parameters["properties"] == {"x": {}}


class TestJsonable:
    def test_dataclasses_enums_and_tuples_become_plain_data(self) -> None:
        shape = Shape("tri", [Point(0, 1)], Color.RED, ["a"])
        assert jsonable(shape) == {
            "name": "tri",
            "points": [{"x": 0, "y": 1}],
            "color": "red",
            "tags": ["a"],
        }
        assert jsonable((1, "a")) == [1, "a"]

    def test_value_without_json_form_names_its_type(self) -> None:
        with pytest.raises(TypeError, match="type bytes"):
            jsonable({"data": b"x"})
