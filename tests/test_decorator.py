"""@tool: decoration, argument conversion, injection, results, errors and timeouts.

Everything that involves running a tool goes through run_agent_loop with the faux provider,
so the arguments are validated and coerced exactly as the loop does it.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import logging
import pathlib
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Optional, Union

import pytest
from typing_extensions import Literal, TypedDict

from piagent import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ImageContent,
    TextContent,
    ToolExecutionEndEvent,
    ToolExecutionUpdateEvent,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
    tool,
)
from piagent.executors import abandoned_tool_threads
from piagent.testing import faux_message, faux_tool_call
from tests.support.agent_support import text_of

WAIT = 10.0  # upper bound for any wait on another thread; never reached when things work


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclass
class Point:
    x: float
    y: float


@dataclass
class Route:
    name: str
    stops: list[Point]
    start: Optional[Point] = None
    priority: Priority = Priority.LOW


class Filter(TypedDict):
    field: str
    points: list[Point]


# --------------------------------------------------------------------------- helpers


def run_calls(faux: Any, tools: list[AgentTool], calls: list[tuple[str, dict[str, Any]]], **config: Any):
    """One assistant turn calling ``calls`` (ids c0, c1...), then "done". Returns (events, results)."""
    faux.set_responses(
        [
            faux_message([faux_tool_call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls)]),
            faux_message("done"),
        ]
    )
    events: list[Any] = []
    messages = run_agent_loop(
        [UserMessage("go")], AgentContext(tools=tools), AgentLoopConfig(model=faux.get_model(), **config), events.append
    )
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert len(results) == len(calls)
    return events, results


# --------------------------------------------------------------------------- decoration


class TestDecoration:
    def test_bare_decorator_builds_an_agent_tool_from_name_docstring_and_hints(self) -> None:
        @tool
        def add(a: int, b: int = 1) -> int:
            """Add two integers.

            Args:
                a: First addend.
                b: Second addend.
            """
            return a + b

        assert isinstance(add, AgentTool)
        assert add.name == "add"
        assert add.label == "add"
        assert add.description == "Add two integers."
        assert add.parameters == {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "First addend."},
                "b": {"type": "integer", "description": "Second addend.", "default": 1},
            },
            "required": ["a"],
            "additionalProperties": False,
        }
        assert add.execution_mode is None
        assert add.timeout is None

    def test_decorated_tool_is_still_callable_as_the_function(self) -> None:
        @tool
        def double(x: int) -> int:
            return 2 * x

        assert double(21) == 42

    def test_options_override_and_forward(self) -> None:
        @tool(
            name="web-search",
            description="Search the web.",
            label="Web search",
            execution_mode="sequential",
            timeout=2.5,
        )
        def search(query: str) -> str:
            """Ignored summary."""
            return query

        assert (search.name, search.description, search.label) == ("web-search", "Search the web.", "Web search")
        assert search.execution_mode == "sequential"
        assert search.timeout == 2.5

    def test_no_docstring_means_empty_description(self) -> None:
        @tool
        def f(x: int) -> int:
            return x

        assert f.description == ""

    def test_lambda_needs_an_explicit_name(self) -> None:
        with pytest.raises(ValueError, match="tool name '<lambda>' is not allowed"):
            tool(lambda x: x)
        assert tool(name="identity")(lambda x: x).name == "identity"

    def test_async_and_generator_functions_are_refused(self) -> None:
        async def fetch(url: str) -> str:
            return url

        def chunks(n: int):  # type: ignore[no-untyped-def]
            yield n

        with pytest.raises(TypeError, match="async functions are not supported"):
            tool(fetch)
        with pytest.raises(TypeError, match="generator functions are not supported"):
            tool(chunks)

    @pytest.mark.parametrize("timeout", [0, -1, "5", True])
    def test_bad_timeout_is_refused(self, timeout: Any) -> None:
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            tool(timeout=timeout)

    def test_on_run_thread_is_forwarded_and_off_by_default(self) -> None:
        @tool(on_run_thread=True)
        def bound(x: int) -> int:
            return x

        @tool
        def free(x: int) -> int:
            return x

        assert (bound.on_run_thread, free.on_run_thread) == (True, False)

    def test_on_run_thread_with_a_timeout_is_refused(self) -> None:
        with pytest.raises(ValueError, match="on_run_thread=True cannot be combined with timeout"):
            tool(on_run_thread=True, timeout=5)

    def test_bad_on_run_thread_is_refused(self) -> None:
        with pytest.raises(TypeError, match="on_run_thread must be a bool, not str"):
            tool(on_run_thread="yes")  # type: ignore[arg-type]

    def test_bad_execution_mode_is_refused(self) -> None:
        with pytest.raises(ValueError, match="execution_mode"):
            tool(execution_mode="eventually")  # type: ignore[arg-type]

    def test_positional_name_is_a_clear_misuse_error(self) -> None:
        with pytest.raises(TypeError, match=r"keyword-only: @tool\(name=...\)"):
            tool("search")  # type: ignore[call-overload]


# --------------------------------------------------------------------------- arguments


class TestArguments:
    def test_arguments_arrive_coerced_by_the_loop(self, faux: Any) -> None:
        seen: dict[str, Any] = {}

        @tool
        def scale(factor: int, ratio: float, verbose: bool) -> str:
            seen.update(factor=factor, ratio=ratio, verbose=verbose)
            return "ok"

        _, (result,) = run_calls(faux, [scale], [("scale", {"factor": "3", "ratio": 2, "verbose": "true"})])
        assert not result.is_error, text_of(result)
        assert seen == {"factor": 3, "ratio": 2.0, "verbose": True}
        assert type(seen["ratio"]) is float

    def test_dataclasses_enums_and_optional_dataclasses_arrive_as_their_types(self, faux: Any) -> None:
        seen: list[Route] = []

        @tool
        def plan(route: Route, alternatives: list[Route], fallback: Optional[Route] = None) -> str:
            seen.extend([route, *alternatives])
            seen.append(fallback)  # type: ignore[arg-type]
            return "planned"

        args = {
            "route": {"name": "a", "stops": [{"x": 1, "y": 2}], "start": {"x": 0, "y": 0}, "priority": "high"},
            "alternatives": [{"name": "b", "stops": []}],
            "fallback": None,
        }
        _, (result,) = run_calls(faux, [plan], [("plan", args)])
        assert not result.is_error, text_of(result)
        route, alternative, fallback = seen
        assert route == Route("a", [Point(1.0, 2.0)], Point(0.0, 0.0), Priority.HIGH)
        assert isinstance(route.stops[0], Point) and isinstance(route.start, Point)
        assert route.priority is Priority.HIGH
        assert alternative == Route("b", [], None, Priority.LOW)
        assert fallback is None

    def test_optional_dataclass_given_arrives_as_instance(self, faux: Any) -> None:
        seen: list[Any] = []

        @tool
        def go(to: Optional[Point] = None) -> str:
            seen.append(to)
            return "ok"

        run_calls(faux, [go], [("go", {"to": {"x": 1, "y": 1}}), ("go", {})])
        assert sorted(seen, key=repr) == sorted([Point(1.0, 1.0), None], key=repr)

    def test_typed_dict_arrives_as_dict_with_converted_values(self, faux: Any) -> None:
        seen: list[Any] = []

        @tool
        def query(where: Filter) -> str:
            seen.append(where)
            return "ok"

        run_calls(faux, [query], [("query", {"where": {"field": "f", "points": [{"x": 1, "y": 2}]}})])
        assert seen == [{"field": "f", "points": [Point(1.0, 2.0)]}]
        assert type(seen[0]) is dict

    def test_union_picks_the_member_the_value_matches(self, faux: Any) -> None:
        seen: list[Any] = []

        @tool
        def locate(where: Optional[dict[str, Point]] = None, at: Union[Point, str] = "home") -> str:
            seen.append((where, at))
            return "ok"

        run_calls(faux, [locate], [("locate", {"where": {"p": {"x": 1, "y": 2}}, "at": {"x": 3, "y": 4}})])
        assert seen == [({"p": Point(1.0, 2.0)}, Point(3.0, 4.0))]

    def test_sets_and_tuples_arrive_as_sets_and_tuples(self, faux: Any) -> None:
        seen: list[Any] = []

        @tool
        def tag(names: set[str], pair: tuple[int, ...], mode: Literal["add", "remove"] = "add") -> str:
            seen.append((names, pair, mode))
            return "ok"

        run_calls(faux, [tag], [("tag", {"names": ["a", "b"], "pair": [1, 2], "mode": "remove"})])
        assert seen == [({"a", "b"}, (1, 2), "remove")]

    def test_positional_only_and_var_keyword_parameters(self, faux: Any) -> None:
        seen: list[Any] = []

        def label(name: str, /, **extra: int) -> str:
            seen.append((name, extra))
            return "ok"

        _, (result,) = run_calls(faux, [tool(label)], [("label", {"name": "n", "a": "1", "b": 2})])
        assert not result.is_error, text_of(result)
        assert seen == [("n", {"a": 1, "b": 2})]

    def test_invalid_arguments_never_reach_the_function(self, faux: Any) -> None:
        calls: list[Any] = []

        @tool
        def move(to: Point) -> str:
            calls.append(to)
            return "moved"

        _, (result,) = run_calls(faux, [move], [("move", {"to": {"x": 1}})])
        assert result.is_error
        assert "Validation failed" in text_of(result)
        assert calls == []

    def test_signal_and_on_update_are_injected(self, faux: Any) -> None:
        received: list[Any] = []

        @tool
        def work(steps: int, signal: AbortSignal, on_update: Any) -> str:
            received.append(signal)
            for step in range(steps):
                on_update(AgentToolResult([TextContent(f"step {step}")]))
            return "finished"

        assert "signal" not in work.parameters["properties"]
        assert "on_update" not in work.parameters["properties"]
        events, (result,) = run_calls(faux, [work], [("work", {"steps": 2})])
        assert isinstance(received[0], AbortSignal) and not received[0].aborted
        updates = [e for e in events if isinstance(e, ToolExecutionUpdateEvent)]
        assert [u.partial_result.content[0].text for u in updates] == ["step 0", "step 1"]
        assert all(u.tool_call_id == "c0" and u.args == {"steps": 2} for u in updates)
        end = next(e for e in events if isinstance(e, ToolExecutionEndEvent))
        assert events.index(updates[-1]) < events.index(end)
        assert text_of(result) == "finished"


# --------------------------------------------------------------------------- results


class Opaque:
    pass


class TestResults:
    def run_returning(self, faux: Any, value: Any) -> ToolResultMessage:
        @tool
        def produce() -> Any:
            return value

        _, (result,) = run_calls(faux, [produce], [("produce", {})])
        return result

    def test_str_becomes_one_text_block(self, faux: Any) -> None:
        result = self.run_returning(faux, "hello")
        assert [b.text for b in result.content] == ["hello"]
        assert result.details is None and not result.is_error

    def test_agent_tool_result_passes_through(self, faux: Any) -> None:
        own = AgentToolResult([TextContent("mine")], details={"k": 1})
        result = self.run_returning(faux, own)
        assert result.content == own.content and result.details == {"k": 1}

    def test_terminate_from_an_agent_tool_result_ends_the_run(self, faux: Any) -> None:
        @tool
        def stop() -> AgentToolResult:
            return AgentToolResult([TextContent("bye")], terminate=True)

        faux.set_responses([faux_message([faux_tool_call("stop", {}, id="c0")]), faux_message("never")])
        messages = run_agent_loop(
            [UserMessage("go")], AgentContext(tools=[stop]), AgentLoopConfig(model=faux.get_model()), lambda e: None
        )
        assert messages[-1].role == "toolResult"
        assert faux.get_pending_response_count() == 1

    def test_list_of_content_blocks_is_the_content(self, faux: Any) -> None:
        blocks = [TextContent("a picture:"), ImageContent("aGk=", "image/png")]
        result = self.run_returning(faux, blocks)
        assert result.content == blocks

    def test_single_content_block_is_the_content(self, faux: Any) -> None:
        result = self.run_returning(faux, TextContent("only"))
        assert [b.text for b in result.content] == ["only"]

    @pytest.mark.parametrize(
        "value, text",
        [
            ({"total": 3, "names": ["a", "é"]}, '{"total": 3, "names": ["a", "é"]}'),
            ([1, 2], "[1, 2]"),
            ([], "[]"),
            (42, "42"),
            (True, "true"),
        ],
    )
    def test_json_data_becomes_json_text_and_details(self, faux: Any, value: Any, text: str) -> None:
        result = self.run_returning(faux, value)
        assert text_of(result) == text
        assert result.details == value
        assert not result.is_error

    def test_dataclass_return_becomes_json_with_plain_details(self, faux: Any) -> None:
        result = self.run_returning(faux, Route("r", [Point(1, 2)], priority=Priority.HIGH))
        data = {"name": "r", "stops": [{"x": 1, "y": 2}], "start": None, "priority": "high"}
        assert result.details == data
        assert text_of(result) == '{"name": "r", "stops": [{"x": 1, "y": 2}], "start": null, "priority": "high"}'

    def test_none_is_an_empty_result(self, faux: Any) -> None:
        result = self.run_returning(faux, None)
        assert result.content == [] and not result.is_error

    def test_value_without_json_form_is_an_error_naming_its_type(self, faux: Any) -> None:
        result = self.run_returning(faux, {"thing": Opaque()})
        assert result.is_error
        assert "returned a value of type dict" in text_of(result)
        assert "Opaque" in text_of(result)

    def test_nan_is_an_error_not_invalid_json(self, faux: Any) -> None:
        result = self.run_returning(faux, float("nan"))
        assert result.is_error
        assert "returned a value of type float" in text_of(result)


class TestErrors:
    def test_exception_becomes_an_error_result_the_model_sees(self, faux: Any) -> None:
        @tool
        def fail(reason: str) -> str:
            raise RuntimeError(f"cannot do it: {reason}")

        _, (result,) = run_calls(faux, [fail], [("fail", {"reason": "disk full"})])
        assert result.is_error
        assert text_of(result) == "cannot do it: disk full"
        # the loop went on: the model was asked again and saw the error
        second_request = faux.state.requests[1].context.messages
        assert text_of(second_request[-1]) == "cannot do it: disk full"

    def test_one_failing_call_does_not_affect_the_others(self, faux: Any) -> None:
        @tool
        def check(n: int) -> str:
            if n == 1:
                raise ValueError("bad n")
            return f"n={n}"

        _, results = run_calls(faux, [check], [("check", {"n": 0}), ("check", {"n": 1}), ("check", {"n": 2})])
        assert [(text_of(r), r.is_error) for r in results] == [("n=0", False), ("bad n", True), ("n=2", False)]


# --------------------------------------------------------------------------- timeouts


class Blocker:
    """A tool body that ignores its signal and blocks until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.threads: list[threading.Thread] = []
        self.signals: list[AbortSignal] = []
        self.finished = threading.Event()

    def __call__(self, signal: AbortSignal) -> str:
        self.threads.append(threading.current_thread())
        self.signals.append(signal)
        self.started.set()
        self.release.wait(WAIT)
        self.finished.set()
        return "too late"

    def finish(self) -> None:
        """Release the call and wait until it returns (its thread is a reused worker that
        stays alive, idle, afterwards: joining it would wait for its idle timeout)."""
        self.release.set()
        assert self.finished.wait(WAIT)


class TestTimeout:
    @pytest.mark.parametrize("mode", ["parallel", "sequential"])
    def test_tool_timeout_aborts_its_signal_and_the_batch_goes_on(
        self, faux: Any, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        blocker = Blocker()
        slow = tool(name="slow", timeout=0.2)(blocker)

        @tool
        def quick() -> str:
            return "quick done"

        before = abandoned_tool_threads()
        try:
            with caplog.at_level(logging.WARNING, logger="piagent"):
                events, results = run_calls(faux, [slow, quick], [("slow", {}), ("quick", {})], tool_execution=mode)
            assert blocker.started.is_set()
            assert results[0].is_error
            assert text_of(results[0]) == "Tool slow timed out after 0.2 seconds"
            assert (text_of(results[1]), results[1].is_error) == ("quick done", False)
            assert blocker.signals[0].aborted
            assert not blocker.finished.is_set()  # the run ended while the tool was still blocked
            assert abandoned_tool_threads() == before + 1
            assert any("timed out" in r.getMessage() and "left to finish" in r.getMessage() for r in caplog.records)
            assert faux.get_pending_response_count() == 0  # the model got the error and answered
        finally:
            blocker.finish()
        # the abandoned call's late result changed nothing
        assert text_of(results[0]) == "Tool slow timed out after 0.2 seconds"

    def test_config_tool_timeout_is_the_default_for_decorated_tools(self, faux: Any) -> None:
        blocker = Blocker()
        slow = tool(name="slow")(blocker)
        try:
            _, (result,) = run_calls(faux, [slow], [("slow", {})], tool_timeout=0.2)
            assert result.is_error and "timed out" in text_of(result)
        finally:
            blocker.finish()


# --------------------------------------------------------------------------- methods


class Library:
    def __init__(self, books: dict[str, str]) -> None:
        self.books = books

    @tool
    def author(self, title: str) -> str:
        """The author of a book.

        Args:
            title: The book's title.
        """
        return self.books.get(title, "unknown")


class TestMethods:
    def test_a_method_tool_read_through_an_instance_is_bound_and_hides_self(self, faux: Any) -> None:
        first, second = Library({"Dune": "Herbert"}), Library({"Dune": "someone else"})
        assert list(first.author.parameters["properties"]) == ["title"]
        assert first.author is first.author  # made once per instance
        assert first.author("Dune") == "Herbert"  # still callable as the method
        _, results = run_calls(faux, [first.author], [("author", {"title": "Dune"})])
        assert text_of(results[0]) == "Herbert" and not results[0].is_error
        _, results = run_calls(faux, [second.author], [("author", {"title": "Dune"})])
        assert text_of(results[0]) == "someone else"

    def test_the_method_tool_used_unbound_fails_with_a_message_saying_what_to_do(self, faux: Any) -> None:
        assert "self" not in Library.author.parameters["properties"]
        _, results = run_calls(faux, [Library.author], [("author", {"title": "Dune"})])
        assert results[0].is_error
        assert "tool 'author' is a method of Library: give the agent the tool of an instance" in text_of(results[0])

    def test_a_plain_function_whose_first_parameter_is_called_self_stays_a_function(self) -> None:
        def outer() -> Any:
            @tool
            def echo(self: str) -> str:
                """Echo."""
                return self

            return echo

        assert list(outer().parameters["properties"]) == ["self"]


# --------------------------------------------------------------------------- string types


class TestStringTypes:
    def test_dates_uuids_decimals_and_paths_have_string_schemas_and_arrive_converted(self, faux: Any) -> None:
        seen: dict[str, Any] = {}

        @tool
        def book(
            when: datetime.datetime,
            day: datetime.date,
            at: datetime.time,
            ref: uuid.UUID,
            price: decimal.Decimal,
            where: pathlib.Path,
            until: Optional[datetime.date] = None,
        ) -> dict[str, Any]:
            """Book a room."""
            seen.update(when=when, day=day, at=at, ref=ref, price=price, where=where, until=until)
            return dict(seen)

        props = book.parameters["properties"]
        assert props["when"] == {"type": "string", "format": "date-time"}
        assert props["day"]["format"] == "date" and props["at"]["format"] == "time"
        assert props["ref"]["format"] == "uuid" and props["price"]["type"] == props["where"]["type"] == "string"
        args = {
            "when": "2026-12-02T10:00:00Z", "day": "2026-12-03", "at": "09:30", "price": 12.5, "where": "/srv/x",
            "ref": "12345678-1234-5678-1234-567812345678", "until": "2026-12-31",
        }  # fmt: skip
        _, results = run_calls(faux, [book], [("book", args)])
        assert not results[0].is_error, text_of(results[0])
        assert seen["when"] == datetime.datetime(2026, 12, 2, 10, tzinfo=datetime.timezone.utc)
        assert seen["day"] == datetime.date(2026, 12, 3) and seen["at"] == datetime.time(9, 30)
        assert seen["ref"] == uuid.UUID(args["ref"]) and seen["price"] == decimal.Decimal("12.5")
        assert seen["where"] == pathlib.Path("/srv/x") and seen["until"] == datetime.date(2026, 12, 31)
        assert results[0].details == {  # and back to strings on the way out
            "when": "2026-12-02T10:00:00+00:00", "day": "2026-12-03", "at": "09:30:00", "ref": args["ref"],
            "price": "12.5", "where": "/srv/x", "until": "2026-12-31",
        }  # fmt: skip

    def test_a_malformed_date_is_an_error_result_naming_the_expected_form(self, faux: Any) -> None:
        @tool
        def remind(day: datetime.date) -> str:
            """Set a reminder."""
            return "ok"

        _, results = run_calls(faux, [remind], [("remind", {"day": "next tuesday"})])
        assert results[0].is_error and "expected an ISO 8601 date, got 'next tuesday'" in text_of(results[0])
