"""OpenTelemetry (``piagent.instrument``): spans, metrics and log correlation of real runs,
read back with the OpenTelemetry SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import (
    NonRecordingSpan,
    NoOpTracerProvider,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    get_current_span,
    use_span,
)

import piagent
from piagent import Agent, AgentTool, AgentToolResult, TextContent
from piagent.ai import Model
from piagent.otel._tracing import _PROXY_PROVIDER
from piagent.testing import faux_message, faux_tool_call
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta, usage
from tests.support.agent_support import WAIT, GatedStream
from tests.support.scripted_server import ScriptedServer

KEY = "sk-otel-secret-0123456789"
EMPTY = {"type": "object", "properties": {}}
WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.tracer_provider.get_tracer("tests")
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name.startswith(prefix)]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans if s.parent is not None and s.parent.span_id == parent.context.span_id]

    def tree(self, root: ReadableSpan, depth: int = 0) -> list[str]:
        lines = ["  " * depth + root.name]
        for child in sorted(self.children(root), key=lambda s: s.start_time or 0):
            lines.extend(self.tree(child, depth + 1))
        return lines

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found

    def dump(self) -> str:
        return "\n".join(span.to_json() for span in self.spans)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    piagent.instrument(telemetry.tracer_provider, telemetry.meter_provider)
    yield telemetry
    piagent.uninstrument()


@pytest.fixture
def otel_with_content() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    piagent.instrument(telemetry.tracer_provider, telemetry.meter_provider, capture_content=True)
    yield telemetry
    piagent.uninstrument()


def make_tool(name: str, execute: Any, schema: dict = EMPTY, **options: Any) -> AgentTool:
    return AgentTool(name, f"the {name} tool", schema, execute, **options)


def ok(text: str) -> AgentToolResult:
    return AgentToolResult([TextContent(text)])


def http_model(server: ScriptedServer) -> Model:
    return Model("gpt-test", api="openai-completions", provider="openai", base_url=server.url, max_tokens=4096)


# --------------------------------------------------------------------------- switch


def test_import_piagent_and_an_uninstrumented_run_never_import_opentelemetry() -> None:
    script = (
        "import sys, piagent\n"
        "from piagent.testing import faux_message, register_faux_provider\n"
        "faux = register_faux_provider(); faux.set_responses([faux_message('hi')])\n"
        "piagent.Agent(model=faux.get_model()).prompt('hello')\n"
        "piagent.uninstrument()\n"
        "print(sorted(name for name in sys.modules if name.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_after_uninstrument_records_nothing(faux) -> None:
    telemetry = Telemetry()
    piagent.instrument(telemetry.tracer_provider, telemetry.meter_provider)
    piagent.uninstrument()
    faux.set_responses([faux_message("hi")])
    Agent(model=faux.get_model()).prompt("hello")
    assert telemetry.spans == []
    assert telemetry.points("gen_ai.client.operation.duration") == []
    assert piagent.instrumentation.installed() is None


def test_capture_content_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="capture_content"):
        piagent.instrument(capture_content="yes")  # type: ignore[arg-type]
    assert piagent.instrumentation.installed() is None


def test_an_agents_own_instrumentation_traces_its_runs_only(faux) -> None:
    from piagent.otel import OpenTelemetryInstrumentation

    own, installed = Telemetry(), Telemetry()
    traced = Agent(model=faux.get_model(), instrumentation=OpenTelemetryInstrumentation(own.tracer_provider))
    plain = Agent(model=faux.get_model())
    faux.set_responses([faux_message("one"), faux_message("two"), faux_message("three"), faux_message("four")])
    try:
        traced.prompt("hello")
        plain.prompt("hello")
        assert [span.name for span in own.spans] == ["chat faux-1", "invoke_agent"]
        piagent.instrument(installed.tracer_provider)  # for every other agent
        traced.prompt("again")
        plain.prompt("again")
    finally:
        piagent.uninstrument()
    assert len(own.named("invoke_agent")) == 2 and len(installed.named("invoke_agent")) == 1


def test_uninstrument_without_instrument_leaves_an_agents_own_log_identifiers(faux, caplog) -> None:
    from piagent.otel import OpenTelemetryInstrumentation

    own = Telemetry()
    agent = Agent(model=faux.get_model(), instrumentation=OpenTelemetryInstrumentation(own.tracer_provider))
    piagent.uninstrument()  # nothing installed: a no-op

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        logging.getLogger("piagent").warning("inside the tool")
        return ok("done")

    agent.tools = [make_tool("probe", execute)]
    faux.set_responses([faux_message([faux_tool_call("probe", {}, id="a")]), faux_message("ok")])
    caplog.set_level(logging.WARNING, logger="piagent")
    try:
        agent.prompt("go")
    finally:
        piagent.otel._logging.detach()  # clean up for the next tests (an agent's instrumentation never detaches)
    (record,) = [r for r in caplog.records if r.getMessage() == "inside the tool"]
    (run,) = own.named("invoke_agent")
    assert record.piagent_trace_id == format(run.context.trace_id, "032x")


def test_the_instrumentation_option_takes_an_instrumentation_or_none(faux) -> None:
    with pytest.raises(TypeError, match="instrumentation"):
        Agent(model=faux.get_model(), instrumentation="otel")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- span tree and threads


def test_a_parallel_batch_runs_its_tool_spans_on_worker_threads_under_the_run_span(otel, faux) -> None:
    both_running = threading.Barrier(2, timeout=WAIT)  # the two calls run at the same time, on two threads
    threads: dict[str, str] = {}

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        both_running.wait()
        threads[call_id] = threading.current_thread().name
        with otel.tracer.start_as_current_span(f"inside {call_id}"):  # user code in the tool
            return ok("done")

    faux.set_responses(
        [faux_message([faux_tool_call("lookup", {}, id="a"), faux_tool_call("lookup", {}, id="b")]), faux_message("ok")]
    )
    Agent(model=faux.get_model(), tools=[make_tool("lookup", execute)]).prompt("go")

    (run,) = otel.named("invoke_agent")
    assert otel.tree(run) == [
        "invoke_agent",
        "  chat faux-1",
        "  execute_tool lookup",
        "    inside a",
        "  execute_tool lookup",
        "    inside b",
        "  chat faux-1",
    ]
    assert threading.current_thread().name not in threads.values() and len(set(threads.values())) == 2
    assert {span.context.trace_id for span in otel.spans} == {run.context.trace_id}
    for tool_span in otel.named("execute_tool"):
        call_id = tool_span.attributes["gen_ai.tool.call.id"]
        assert [child.name for child in otel.children(tool_span)] == [f"inside {call_id}"]
        assert tool_span.kind == SpanKind.INTERNAL
        assert dict(tool_span.attributes) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": "the lookup tool",
        }
    assert run.kind == SpanKind.INTERNAL and run.status.status_code == StatusCode.UNSET
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.provider.name"] == "faux"
    assert run.attributes["gen_ai.request.model"] == "faux-1"
    (tools,) = otel.points("gen_ai.execute_tool.duration")
    assert tools.count == 2 and dict(tools.attributes) == {"gen_ai.tool.name": "lookup", "gen_ai.tool.type": "function"}
    (runs,) = otel.points("gen_ai.invoke_agent.duration")
    assert runs.count == 1


@pytest.mark.parametrize("where", ["a user's executor", "a worker (sequential)", "the run thread (on_run_thread)"])
def test_a_tool_runs_inside_its_execute_tool_span_wherever_it_runs(otel, faux, where: str) -> None:
    seen: list[str] = []

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.append(threading.current_thread().name)
        with otel.tracer.start_as_current_span("inside"):
            return ok("done")

    faux.set_responses([faux_message([faux_tool_call("lookup", {}, id="a")]), faux_message("ok")])
    tools = [make_tool("lookup", execute)]
    if where == "a user's executor":
        with ThreadPoolExecutor(1, thread_name_prefix="users-pool") as pool:
            Agent(model=faux.get_model(), tools=tools, executor=pool).prompt("go")
        assert seen[0].startswith("users-pool")
    elif where == "a worker (sequential)":
        Agent(model=faux.get_model(), tools=tools, tool_execution="sequential").prompt("go")
        assert seen[0].startswith("piagent-worker")
    else:
        bound = [make_tool("lookup", execute, on_run_thread=True)]
        Agent(model=faux.get_model(), tools=bound).prompt("go")
        assert seen == [threading.current_thread().name]
    (run,) = otel.named("invoke_agent")
    assert otel.tree(run) == ["invoke_agent", "  chat faux-1", "  execute_tool lookup", "    inside", "  chat faux-1"]


def test_an_agent_run_by_a_tool_is_a_child_of_that_tool_call(otel, faux) -> None:
    inner = Agent(model=faux.get_model())

    def delegate(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return ok(inner.prompt("sub-task").text)  # type: ignore[union-attr]

    faux.set_responses(
        [faux_message([faux_tool_call("delegate", {}, id="a")]), faux_message("inner"), faux_message("done")]
    )
    Agent(model=faux.get_model(), tools=[make_tool("delegate", delegate)]).prompt("go")
    outer = next(span for span in otel.named("invoke_agent") if span.parent is None)
    assert otel.tree(outer) == [
        "invoke_agent",
        "  chat faux-1",
        "  execute_tool delegate",
        "    invoke_agent",
        "      chat faux-1",
        "  chat faux-1",
    ]


def test_a_run_started_with_wait_false_belongs_to_the_callers_current_span(otel, faux) -> None:
    faux.set_responses([faux_message("hi")])
    agent = Agent(model=faux.get_model())
    with otel.tracer.start_as_current_span("web request") as request:
        future = agent.prompt("hello", wait=False)
    future.result(WAIT)  # type: ignore[union-attr]
    (run,) = otel.named("invoke_agent")
    assert run.parent is not None and run.parent.span_id == request.get_span_context().span_id
    assert [span.name for span in otel.children(run)] == ["chat faux-1"]


def test_agent_loop_on_its_background_thread_belongs_to_the_callers_span(otel, faux) -> None:
    from piagent import AgentContext, AgentLoopConfig, UserMessage, agent_loop

    faux.set_responses([faux_message("hi")])
    with otel.tracer.start_as_current_span("caller") as caller:
        stream = agent_loop([UserMessage("hello")], AgentContext("", [], []), AgentLoopConfig(model=faux.get_model()))
    list(stream)
    (run,) = otel.named("invoke_agent")
    assert run.parent is not None and run.parent.span_id == caller.get_span_context().span_id


def test_two_agents_in_two_threads_never_mix_their_spans(otel, faux) -> None:
    all_in_tools = threading.Barrier(2, timeout=WAIT)  # both runs are inside a tool at once

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        all_in_tools.wait()
        return ok(call_id)

    faux.set_responses(
        [
            faux_message([faux_tool_call("lookup", {}, id="call-A")]),
            faux_message([faux_tool_call("lookup", {}, id="call-B")]),
            faux_message("A done"),
            faux_message("B done"),
        ]
    )
    started = threading.Barrier(2, timeout=WAIT)
    parents: dict[str, Any] = {}

    def serve(name: str) -> None:
        agent = Agent(model=faux.get_model(), tools=[make_tool("lookup", execute)])
        with otel.tracer.start_as_current_span(f"request {name}") as request:
            parents[name] = request.get_span_context()
            started.wait()
            agent.prompt(f"from {name}")

    threads = [threading.Thread(target=serve, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    runs = otel.named("invoke_agent")
    assert len(runs) == 2
    calls = set()
    for run in runs:
        owner = next(name for name, parent in parents.items() if parent.span_id == run.parent.span_id)
        assert run.context.trace_id == parents[owner].trace_id
        assert [s.name for s in otel.children(run)] == ["chat faux-1", "execute_tool lookup", "chat faux-1"]
        (tool,) = [s for s in otel.children(run) if s.name.startswith("execute_tool")]
        calls.add(tool.attributes["gen_ai.tool.call.id"])
        assert all(s.context.trace_id == run.context.trace_id for s in otel.children(run))
    assert calls == {"call-A", "call-B"}
    assert parents["one"].trace_id != parents["two"].trace_id


def test_a_steered_turn_is_one_more_chat_span_of_the_same_run(otel_with_content, faux) -> None:
    otel = otel_with_content
    agent = Agent(model=faux.get_model())

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        agent.steer("also mention the steered detail")
        return ok("tool output")

    agent.tools = [make_tool("lookup", execute)]
    faux.set_responses([faux_message([faux_tool_call("lookup", {}, id="a")]), faux_message("ok")])
    agent.prompt("go")
    (run,) = otel.named("invoke_agent")
    assert otel.tree(run) == ["invoke_agent", "  chat faux-1", "  execute_tool lookup", "  chat faux-1"]
    second = sorted(otel.named("chat"), key=lambda s: s.start_time or 0)[1]
    inputs = json.loads(second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool", "user"]
    assert inputs[-1]["parts"] == [{"type": "text", "content": "also mention the steered detail"}]
    assert inputs[2]["parts"] == [{"type": "tool_call_response", "id": "a", "response": "tool output"}]


# --------------------------------------------------------------------------- errors, aborts, retries


def test_a_retried_call_is_one_chat_span_with_a_retry_event_and_its_usage(otel) -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("piagent")
    logger.addHandler(handler)
    previous_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with ScriptedServer() as server:
            server.reply(b'{"error": {"message": "overloaded"}}', status=503, headers={"retry-after-ms": "0"})
            server.reply(chat_text("Hello", usage_=usage(100, 20, cached=60)))
            result = Agent(model=http_model(server), get_api_key=lambda provider: KEY).prompt("hi")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
    assert result.text == "Hello"
    (run,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    assert chat.parent.span_id == run.context.span_id and chat.kind == SpanKind.CLIENT
    assert chat.name == "chat gpt-test" and chat.status.status_code == StatusCode.UNSET
    (retry,) = chat.events
    assert retry.name == "piagent.retry"
    assert dict(retry.attributes) == {
        "piagent.retry.attempt": 1,
        "piagent.retry.delay": 0.0,
        "http.response.status_code": 503,
        "error.type": "503",
    }
    attributes = dict(chat.attributes)
    first_chunk = attributes.pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(first_chunk, float) and first_chunk >= 0
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.type": "text",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.request.stream": True,
        "server.address": "127.0.0.1",
        "server.port": int(server.url.rsplit(":", 1)[1]),
        "gen_ai.response.id": "chatcmpl-A1",
        "gen_ai.response.model": "gpt-test-2025-01-01",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 60,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 0,
    }
    assert run.attributes["gen_ai.usage.input_tokens"] == 100 and run.attributes["gen_ai.usage.output_tokens"] == 20
    tokens = {point.attributes["gen_ai.token.type"]: point for point in otel.points("gen_ai.client.token.usage")}
    assert (tokens["input"].sum, tokens["output"].sum) == (100, 20)
    assert tokens["input"].attributes["gen_ai.request.model"] == "gpt-test"
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 1 and "error.type" not in duration.attributes
    (logged,) = [record for record in records if "retrying" in record.getMessage()]
    assert logged.piagent_trace_id == format(run.context.trace_id, "032x")
    assert logged.piagent_span_id == format(run.context.span_id, "016x")
    assert KEY not in otel.dump()


def test_a_streamed_call_records_its_chunk_timings_reasoning_tokens_and_output_type(otel) -> None:
    """gen_ai.client.operation.time_to_first_chunk once per call, time_per_output_chunk for every
    streamed chunk after the first (a chunk is one delta of text, thinking or tool-call
    arguments: the start and end of a block are not chunks), both with the call's attributes;
    the span carries gen_ai.response.time_to_first_chunk, the reasoning tokens and
    gen_ai.output.type (json for a structured-output request)."""
    deltas: list[Any] = []

    def on_event(event: Any, *_: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type.endswith("_delta"):
            deltas.append(event)

    with ScriptedServer() as server:
        server.reply(chat_text("a", "b", "c", usage_=usage(10, 30, reasoning=12)))
        server.reply(chat_text('{"n": 1}'))
        agent = Agent(model=http_model(server), get_api_key=lambda provider: KEY)
        agent.subscribe(on_event)
        agent.prompt("hi")
        assert len(deltas) == 3  # one per streamed chunk of text
        agent.prompt("a number", output_type=dict)
    plain, structured = sorted(otel.named("chat"), key=lambda s: s.start_time or 0)
    assert plain.attributes["gen_ai.output.type"] == "text" and structured.attributes["gen_ai.output.type"] == "json"
    assert plain.attributes["gen_ai.usage.reasoning.output_tokens"] == 12
    assert plain.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    (first,) = otel.points("gen_ai.client.operation.time_to_first_chunk")
    (per_chunk,) = otel.points("gen_ai.client.operation.time_per_output_chunk")
    assert first.count == 2 and per_chunk.count == len(deltas) - 2
    assert (
        dict(first.attributes)
        == dict(per_chunk.attributes)
        == {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-test",
            "server.address": "127.0.0.1",
            "server.port": int(server.url.rsplit(":", 1)[1]),
        }
    )


@pytest.mark.parametrize("reported", ["gpt-test-2026-11-30", "gpt-test"])
def test_the_response_model_is_the_one_the_provider_reports_else_the_requested_one(otel, reported: str) -> None:
    chunks = [chunk({"content": "Hello"}, model=reported), chunk({}, "stop", model=reported)]
    with ScriptedServer() as server:
        server.reply(chat_stream(*chunks))
        result = Agent(model=http_model(server), get_api_key=lambda provider: KEY).prompt("hi")
    assert result.text == "Hello"
    (chat,) = otel.named("chat")
    assert chat.attributes["gen_ai.request.model"] == "gpt-test"
    assert chat.attributes["gen_ai.response.model"] == reported


def test_a_failed_call_marks_its_chat_and_run_spans_with_the_status_code(otel) -> None:
    with ScriptedServer() as server:
        server.reply(b'{"error": {"message": "bad request: no such model"}}', status=400)
        result = Agent(model=http_model(server), get_api_key=lambda provider: KEY).prompt("hi")
    assert result.stop_reason == "error"
    (run,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    for span in (chat, run):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == "400"
        assert span.status.description is None  # the provider's text can echo the prompt: content
    assert "no such model" not in otel.dump()
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("error",)
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "400"
    assert otel.points("gen_ai.client.token.usage") == []  # the call reported no usage


def test_with_content_captured_the_status_describes_the_provider_error(otel_with_content) -> None:
    with ScriptedServer() as server:
        server.reply(b'{"error": {"message": "bad request: no such model"}}', status=400)
        Agent(model=http_model(server), get_api_key=lambda provider: KEY).prompt("hi")
    for span in (*otel_with_content.named("chat"), *otel_with_content.named("invoke_agent")):
        assert "no such model" in span.status.description


def test_a_failed_structured_run_keeps_the_raw_output_out_of_its_spans(otel, faux) -> None:
    faux.set_responses([faux_message("PRIVATE raw answer, not JSON")])
    result = Agent(model=faux.get_model(), output_type=int, output_retries=0).prompt("hi")
    assert result.stop_reason == "error" and "PRIVATE" in (result.error_message or "")
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code == StatusCode.ERROR and run.status.description is None
    assert "PRIVATE" not in otel.dump()


def test_a_connection_failure_is_typed_by_its_exception_class(otel) -> None:
    with ScriptedServer() as server:
        url = server.url
    model = Model("gpt-test", api="openai-completions", provider="openai", base_url=url)  # nobody listens
    Agent(model=model, get_api_key=lambda provider: KEY, max_retries=0).prompt("hi")
    (chat,) = otel.named("chat")
    assert chat.attributes["error.type"] == "requests.exceptions.ConnectionError"


def test_an_abort_during_a_model_call_ends_the_chat_and_run_spans_as_aborted(otel) -> None:
    gate = GatedStream()
    agent = Agent(model=Model("gated", provider="test"), stream_fn=gate)
    future = agent.prompt("hi", wait=False)
    assert gate.started.wait(WAIT)
    agent.abort()
    future.result(WAIT)  # type: ignore[union-attr]
    (run,) = otel.named("invoke_agent")
    (chat,) = otel.named("chat")
    for span in (chat, run):
        assert span.status.status_code == StatusCode.ERROR and span.attributes["error.type"] == "aborted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("aborted",)


def test_a_refusal_is_reported_as_the_conventions_content_filter_finish_reason(otel, faux) -> None:
    refusal = faux_message("I can't help with that.", stop_reason="refusal")
    refusal.refusal = {"category": "cyber", "explanation": None}
    faux.set_responses([refusal])
    Agent(model=faux.get_model()).prompt("hi")
    (chat,) = otel.named("chat")
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("content_filter",)
    assert chat.status.status_code == StatusCode.UNSET  # the call worked: the model said no


def test_an_aborted_tool_call_ends_its_span_as_aborted(otel, faux) -> None:
    running = threading.Event()

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        running.set()
        signal.wait(WAIT)
        raise RuntimeError("stopped")

    faux.set_responses([faux_message([faux_tool_call("slow", {}, id="a")]), faux_message("never sent")])
    agent = Agent(model=faux.get_model(), tools=[make_tool("slow", execute)])
    future = agent.prompt("go", wait=False)
    assert running.wait(WAIT)
    agent.abort()
    future.result(WAIT)  # type: ignore[union-attr]
    (tool,) = otel.named("execute_tool")
    assert tool.status.status_code == StatusCode.ERROR and tool.attributes["error.type"] == "aborted"
    (run,) = otel.named("invoke_agent")
    assert run.attributes["error.type"] == "aborted"


def test_a_raising_tool_is_typed_by_its_exception_class(otel, faux) -> None:
    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        raise ValueError("PRIVATE detail of the failure")

    faux.set_responses([faux_message([faux_tool_call("broken", {}, id="a")]), faux_message("sorry")])
    Agent(model=faux.get_model(), tools=[make_tool("broken", execute)]).prompt("go")
    (tool,) = otel.named("execute_tool")
    assert tool.status.status_code == StatusCode.ERROR and tool.attributes["error.type"] == "ValueError"
    assert "PRIVATE" not in otel.dump()  # error text is content: only with capture_content
    (duration,) = otel.points("gen_ai.execute_tool.duration")
    assert duration.attributes["error.type"] == "ValueError"
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code == StatusCode.UNSET  # the model answered the failure: the run succeeded


def test_a_run_whose_listener_raises_records_the_exception_on_the_run_span(otel, faux) -> None:
    faux.set_responses([faux_message("hi")])
    agent = Agent(model=faux.get_model())

    def listener(event: Any) -> None:
        if event.type == "turn_end" and event.message.stop_reason == "stop":
            raise KeyError("listener bug")

    agent.subscribe(listener)
    agent.prompt("hello")
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code == StatusCode.ERROR and run.attributes["error.type"] == "KeyError"
    assert [event.name for event in run.events] == ["exception"]


# --------------------------------------------------------------------------- content


def tool_conversation(server: ScriptedServer) -> list[bytes]:
    return chat_stream(
        chunk({"role": "assistant", "content": None}),
        tool_delta(0, "call_1", "echo", '{"word": "PRIVATE-ARG"}'),
        chunk({}, "tool_calls"),
        chunk(choices=False, usage=usage(30, 5)),
    )


def run_tool_conversation(server: ScriptedServer) -> None:
    server.reply(tool_conversation(server))
    server.reply(chat_text("PRIVATE-ANSWER"))
    echo = make_tool("echo", lambda call_id, args, signal, on_update: ok(f"PRIVATE-RESULT {args['word']}"), WORD)
    agent = Agent(model=http_model(server), system_prompt="PRIVATE-SYSTEM", tools=[echo], get_api_key=lambda p: KEY)
    agent.prompt("PRIVATE-PROMPT")


def test_without_capture_content_no_message_argument_or_result_is_recorded(otel) -> None:
    with ScriptedServer() as server:
        run_tool_conversation(server)
    assert len(otel.spans) == 4
    dump = otel.dump()
    assert "PRIVATE" not in dump and KEY not in dump


def test_with_capture_content_messages_arguments_and_results_follow_the_conventions(otel_with_content) -> None:
    otel = otel_with_content
    with ScriptedServer() as server:
        run_tool_conversation(server)
    first, second = sorted(otel.named("chat"), key=lambda s: s.start_time or 0)
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "PRIVATE-PROMPT"}]}
    ]
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "PRIVATE-SYSTEM"}]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "echo", "arguments": {"word": "PRIVATE-ARG"}}],
            "finish_reason": "tool_call",
        }
    ]
    (definition,) = json.loads(first.attributes["gen_ai.tool.definitions"])
    assert definition == {"type": "function", "name": "echo", "description": "the echo tool", "parameters": WORD}
    assert json.loads(second.attributes["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "PRIVATE-ANSWER"}
    ]
    (tool,) = otel.named("execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"word": "PRIVATE-ARG"}
    assert tool.attributes["gen_ai.tool.call.result"] == "PRIVATE-RESULT PRIVATE-ARG"
    assert KEY not in otel.dump()


def test_the_readme_shows_the_span_tree_its_observability_example_prints(capsys) -> None:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Observability")
    section = text[start : text.index("\n## ", start + 1)]
    (example,) = re.findall(r"^```python\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    (shown,) = re.findall(r"^```text\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    exec(compile(example, "README.md Observability example", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == shown
    assert piagent.instrumentation.installed() is None


def test_the_http_request_of_a_model_call_is_traced_under_its_chat_span(otel) -> None:
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    instrumentor = RequestsInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider)
    try:
        with ScriptedServer() as server:
            server.reply(b'{"error": {"message": "busy"}}', status=503, headers={"retry-after-ms": "0"})
            server.reply(chat_text("Hello"))
            Agent(model=http_model(server), get_api_key=lambda provider: KEY).prompt("hi")
    finally:
        instrumentor.uninstrument()
    (chat,) = otel.named("chat")
    requests_spans = [span for span in otel.spans if span.name == "POST"]
    assert len(requests_spans) == 2  # the 503 and the retry
    assert all(span.parent is not None and span.parent.span_id == chat.context.span_id for span in requests_spans)


def test_an_exception_out_of_a_run_keeps_its_message_out_of_the_spans(otel, faux) -> None:
    """An exception's text can quote the prompt: without content capture, the spans record
    its type (``error.type``, the exception event's ``exception.type``), not its message."""

    def convert(messages: Any) -> Any:
        raise ValueError(f"cannot convert PRIVATE {messages[-1].content}")

    result = Agent(model=faux.get_model(), convert_to_llm=convert).prompt("my secret prompt")
    assert "PRIVATE" in (result.error_message or "")
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code == StatusCode.ERROR and run.attributes["error.type"] == "ValueError"
    assert [event.attributes["exception.type"] for event in run.events if event.name == "exception"] == ["ValueError"]
    assert "PRIVATE" not in otel.dump() and "secret prompt" not in otel.dump()


def test_with_content_captured_an_exception_event_keeps_its_message(otel_with_content, faux) -> None:
    def convert(messages: Any) -> Any:
        raise ValueError("cannot convert PRIVATE")

    Agent(model=faux.get_model(), convert_to_llm=convert).prompt("hi")
    (run,) = otel_with_content.named("invoke_agent")
    (event,) = [event for event in run.events if event.name == "exception"]
    assert event.attributes["exception.message"] == "cannot convert PRIVATE"


# --------------------------------------------------------------------------- what records


def test_spans_without_a_meter_provider_still_carry_the_time_to_first_chunk(faux) -> None:
    """Chunks are timed when the chat span records, even if no metric does."""
    telemetry = Telemetry()
    piagent.instrument(telemetry.tracer_provider, NoOpMeterProvider())
    try:
        faux.set_responses([faux_message("a b c d")])
        Agent(model=faux.get_model()).prompt("hi")
    finally:
        piagent.uninstrument()
    (chat,) = telemetry.named("chat")
    assert chat.attributes["gen_ai.response.time_to_first_chunk"] >= 0


def test_metrics_are_recorded_when_the_sampler_records_no_span(faux) -> None:
    """Chunks are timed for the metrics even when no span records (a sampler dropped the trace)."""
    telemetry = Telemetry()
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    unsampled.add_span_processor(SimpleSpanProcessor(telemetry.exporter))
    deltas: list[Any] = []
    piagent.instrument(unsampled, telemetry.meter_provider)
    try:
        faux.set_responses([faux_message("word " * 60)])
        agent = Agent(model=faux.get_model())
        agent.subscribe(lambda event: deltas.append(event) if event.type == "message_update" else None)
        agent.prompt("hi")
    finally:
        piagent.uninstrument()
    chunks = [e for e in deltas if e.assistant_message_event.type == "text_delta"]
    assert telemetry.spans == [] and len(chunks) > 2
    (first,) = telemetry.points("gen_ai.client.operation.time_to_first_chunk")
    (per_chunk,) = telemetry.points("gen_ai.client.operation.time_per_output_chunk")
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert (first.count, per_chunk.count, duration.count) == (1, len(chunks) - 1, 1)


def test_a_run_nothing_records_keeps_the_callers_trace_for_its_tools_and_logs(faux, caplog) -> None:
    """With no-op providers piagent starts no span at all, and the caller's trace goes on: the
    tool runs in it (its HTTP calls propagate it) and the run's log records carry its ids."""
    caller = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    seen: list[int] = []

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.append(get_current_span().get_span_context().trace_id)
        logging.getLogger("piagent").warning("inside the tool")
        return ok("done")

    agent = Agent(model=faux.get_model(), tools=[make_tool("probe", execute)])
    faux.set_responses([faux_message([faux_tool_call("probe", {}, id="a")]), faux_message("ok")])
    caplog.set_level(logging.WARNING, logger="piagent")
    piagent.instrument(NoOpTracerProvider(), NoOpMeterProvider())
    try:
        with use_span(NonRecordingSpan(caller)):
            assert agent.prompt("go").text == "ok"
    finally:
        piagent.uninstrument()
    (record,) = [r for r in caplog.records if r.getMessage() == "inside the tool"]
    assert seen == [0x1234]
    assert (record.piagent_trace_id, record.piagent_span_id) == (format(0x1234, "032x"), format(0x5678, "016x"))


def test_global_providers_configured_after_instrument_record_the_runs_that_follow() -> None:
    """instrument() with the global providers, before the application configures the SDK: runs
    record nothing; once it sets a meter provider they record metrics, once it sets a tracer
    provider spans (OpenTelemetry's global stand-ins then forward; a global provider can be set
    once per process, hence a fresh one)."""
    script = (
        "import json, piagent\n"
        "from opentelemetry import metrics, trace\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from piagent.testing import faux_message, register_faux_provider\n"
        "faux = register_faux_provider()\n"
        "reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()\n"
        "def run():\n"
        "    faux.set_responses([faux_message('word ' * 60)])\n"
        "    piagent.Agent(model=faux.get_model()).prompt('hi')\n"
        "    data = reader.get_metrics_data()\n"
        "    names = sorted({m.name for r in (data.resource_metrics if data else ()) for s in r.scope_metrics\n"
        "                    for m in s.metrics if s.scope.name == 'piagent'})\n"
        "    spans = sorted(span.name for span in exporter.get_finished_spans())\n"
        "    exporter.clear()\n"
        "    return {'metrics': names, 'spans': spans}\n"
        "stand_in = type(metrics.get_meter_provider()).__name__\n"
        "piagent.instrument()\n"
        "seen = [stand_in, run()]\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "seen.append(run())\n"
        "tracer_provider = TracerProvider()\n"
        "tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(tracer_provider)\n"
        "seen.append(run())\n"
        "print(json.dumps(seen))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    stand_in, before, metered, traced = json.loads(out.stdout)
    assert stand_in == _PROXY_PROVIDER  # the name piagent recognises the API's stand-in by
    assert before == {"metrics": [], "spans": []}
    assert metered["spans"] == [] and "gen_ai.invoke_agent.duration" in metered["metrics"]
    assert "gen_ai.client.operation.time_per_output_chunk" in metered["metrics"]
    assert traced["spans"] == ["chat faux-1", "invoke_agent"]
