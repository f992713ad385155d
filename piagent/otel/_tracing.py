"""The OpenTelemetry :class:`~piagent.instrumentation.Instrumentation`: spans and metrics of runs.

Span tree of a run (docs/observability.md#spans)::

    invoke_agent                     INTERNAL, on the run thread, current while the run runs
    ├── chat {model}                 CLIENT, one per model call (connection, retries, stream)
    ├── execute_tool {tool}          INTERNAL, tool_execution_start .. tool_execution_end;
    │                                current in the tool's own thread while it executes
    └── chat {model} ...

Parenting across threads rides on ``contextvars``: piagent runs every tool call in a copy of the
run thread's context, and a ``wait=False`` run or ``agent_loop()`` in a copy of the caller's.

Cost (decided when a run starts): with no-op tracer and meter providers a run starts no span
and installs no wrapper. Otherwise spans are started (a sampler sees their attributes, and their
context is what the tool and HTTP spans hang from), but what only a recording span keeps
(content, response attributes) is built only for one that records; metrics are recorded only
when the meter provider is not a no-op, and streamed chunks are timed only when one of the two
wants them.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Histogram, MeterProvider, NoOpMeterProvider, get_meter, get_meter_provider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from .. import __version__
from ..exceptions import InvalidTypeError
from ..instrumentation import Emit, Instrumentation
from . import _convention as c
from . import _logging

SCOPE = "piagent"
_DELTAS = frozenset(("text_delta", "thinking_delta", "toolcall_delta"))  # a streamed chunk each
# The API's stand-in for the global provider until the application sets one (its instruments
# then forward to it): a no-op while it is what get_meter_provider() returns.
_PROXY_PROVIDER = "_ProxyMeterProvider"


@dataclass
class _Tool:
    span: Span
    started: float
    metric: dict[str, Any]  # the attributes of its gen_ai.execute_tool.duration
    error_type: Optional[str] = None  # set on the tool's thread when execute raised


@dataclass
class _Run:
    span: Span
    signal: Any
    descriptions: dict[str, str]
    started: float
    metric: dict[str, Any]  # the attributes of its gen_ai.invoke_agent.duration
    metering: bool  # the meter provider records (not a no-op)
    idle: bool = False  # nothing records: no span, no metric (the seams pass through)
    tools: dict[str, _Tool] = field(default_factory=dict)
    last_assistant: Any = None
    error_type: Optional[str] = None  # of the last failed model call
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class _Call:
    error_type: Optional[str] = None
    span: Optional[Span] = None
    started: float = 0.0
    metric: dict[str, Any] = field(default_factory=dict)  # the attributes of its streaming metrics
    last_chunk: Optional[float] = None  # when the previous streamed chunk arrived
    metering: bool = False  # record the chunk metrics
    recording: bool = False  # the span records (time_to_first_chunk)
    timing: bool = False  # time the next streamed chunk: metering, or recording until the first


_RUN: contextvars.ContextVar[Optional[_Run]] = contextvars.ContextVar("piagent_otel_run", default=None)
_CALL: contextvars.ContextVar[Optional[_Call]] = contextvars.ContextVar("piagent_otel_call", default=None)


def current_run_span() -> Optional[Span]:
    """The ``invoke_agent`` span of the run this thread works for (its tools' threads included)."""
    run = _RUN.get()
    return run.span if run is not None else None


class OpenTelemetryInstrumentation(Instrumentation):
    """Spans and metrics of the runs it observes (all of them after :func:`piagent.instrument`, or
    one agent's with ``Agent(instrumentation=...)``); creating one also adds the run identifiers
    to piagent's log records (see ``_logging``)."""

    def __init__(
        self,
        tracer_provider: Optional[TracerProvider] = None,
        meter_provider: Optional[MeterProvider] = None,
        capture_content: bool = False,
    ) -> None:
        if not isinstance(capture_content, bool):
            raise InvalidTypeError(f"capture_content must be a bool, got {type(capture_content).__name__}")
        self.capture_content = capture_content
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter = get_meter(SCOPE, __version__, meter_provider)
        self._call_duration = _histogram(
            meter, c.CLIENT_OPERATION_DURATION, "s", "GenAI operation duration.", c.DURATION_BUCKETS
        )
        self._tokens = _histogram(
            meter, c.CLIENT_TOKEN_USAGE, "{token}", "Number of input and output tokens used.", c.TOKEN_BUCKETS
        )
        self._tool_duration = _histogram(
            meter, c.EXECUTE_TOOL_DURATION, "s", "The duration of a single tool execution.", c.DURATION_BUCKETS
        )
        self._run_duration = _histogram(
            meter, c.INVOKE_AGENT_DURATION, "s", "The duration of a single agent invocation.", c.AGENT_DURATION_BUCKETS
        )
        self._first_chunk = _histogram(
            meter, c.CLIENT_TIME_TO_FIRST_CHUNK, "s", "Time to receive the first chunk.", c.DURATION_BUCKETS
        )
        self._per_chunk = _histogram(
            meter, c.CLIENT_TIME_PER_OUTPUT_CHUNK, "s", "Time per output chunk, after the first.", c.DURATION_BUCKETS
        )
        _logging.attach(current_run_span)

    # -- runs -------------------------------------------------------------------------------

    def run(self, body: Callable[[Emit], Any], emit: Emit, context: Any, config: Any, signal: Any) -> Any:
        metering = self._metering()
        if not metering and not self._tracing():
            return self._idle_run(body, emit)
        model = config.model
        attributes: dict[str, Any] = {c.OPERATION_NAME: "invoke_agent"}
        if model is not None:
            attributes[c.PROVIDER_NAME] = c.provider_name(model.provider)
            attributes[c.REQUEST_MODEL] = model.id
        if config.session_id:
            attributes[c.CONVERSATION_ID] = config.session_id
        span = self._tracer.start_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes)
        if self.capture_content and context.system_prompt and span.is_recording():
            span.set_attribute(c.SYSTEM_INSTRUCTIONS, c.system_instructions(context.system_prompt))
        descriptions = {tool.name: tool.description for tool in context.tools or ()}
        metric = {c.REQUEST_MODEL: model.id} if model is not None else {}
        run = _Run(span, signal, descriptions, time.monotonic(), metric, metering)

        def observe(event: Any) -> None:
            if event.type == "message_update":  # the bulk of the events; a delta is one streamed chunk
                call = _CALL.get()
                if call is not None and call.timing and event.assistant_message_event.type in _DELTAS:
                    self._chunk(call)
            else:
                self._observe(run, event)
            emit(event)

        token = otel_context.attach(trace.set_span_in_context(span))
        run_token = _RUN.set(run)
        try:
            messages = body(observe)
        except BaseException as exc:
            self._end_run(run, c.error_type(exc), self._content(str(exc)), exc)
            raise
        finally:
            _RUN.reset(run_token)
            otel_context.detach(token)
        last = run.last_assistant
        if last is not None and last.stop_reason == "aborted":
            self._end_run(run, c.ABORTED, self._content(last.error_message))
        elif last is not None and last.stop_reason == "error":
            self._end_run(run, run.error_type or c.OTHER, self._content(last.error_message))
        else:
            self._end_run(run, None, None)
        return messages

    def _idle_run(self, body: Callable[[Emit], Any], emit: Emit) -> Any:
        """A run whose spans and metrics nothing records: no wrapper, no span (a no-op tracer
        gives the caller's span back anyway: its context is what the run's would carry, for the
        log identifiers and for the spans of tools and HTTP requests)."""
        run = _Run(trace.get_current_span(), None, {}, 0.0, {}, False, idle=True)
        token = _RUN.set(run)
        try:
            return body(emit)
        finally:
            _RUN.reset(token)

    def _tracing(self) -> bool:
        """Whether spans may record: the tracer provider is neither a no-op nor the global
        stand-in of an application that has set none (checked per run: it may set one later)."""
        if self._tracer_provider is not None:
            return not isinstance(self._tracer_provider, trace.NoOpTracerProvider)
        return not isinstance(trace.get_tracer_provider(), (trace.NoOpTracerProvider, trace.ProxyTracerProvider))

    def _metering(self) -> bool:
        """Whether metrics are recorded: the meter provider is neither a no-op nor the global
        stand-in of an application that has set none (checked per run: it may set one later)."""
        if self._meter_provider is not None:
            return not isinstance(self._meter_provider, NoOpMeterProvider)
        provider = get_meter_provider()
        return not isinstance(provider, NoOpMeterProvider) and type(provider).__name__ != _PROXY_PROVIDER

    def _content(self, text: Optional[str]) -> Optional[str]:
        """``text`` (an error text, which can quote the prompt or the model's output) if content
        is captured, else None: the status then has no description, ``error.type`` says what failed."""
        return text if self.capture_content else None

    def _fail(self, span: Span, error: str, description: Optional[str], exc: Optional[BaseException] = None) -> None:
        """Mark ``span`` failed; ``exc`` is recorded whole (message, stack trace) only if content
        is captured, else as its type alone (its text can quote the prompt)."""
        span.set_attribute(c.ERROR_TYPE, error)
        span.set_status(Status(StatusCode.ERROR, description or None))
        if exc is not None and self.capture_content:
            span.record_exception(exc)
        elif exc is not None:
            kind = type(exc)
            name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            span.add_event("exception", {"exception.type": name})

    def _end_run(
        self, run: _Run, error: Optional[str], description: Optional[str], exc: Optional[BaseException] = None
    ) -> None:
        span = run.span
        span.set_attribute(c.USAGE_INPUT_TOKENS, run.input_tokens)
        span.set_attribute(c.USAGE_OUTPUT_TOKENS, run.output_tokens)
        for tool in list(run.tools.values()):  # calls the run left behind (it raised mid-batch)
            self._end_tool(run, tool, c.ABORTED if error is None else error)
        metric = run.metric
        if error is not None:
            self._fail(span, error, description, exc)
            metric = {**metric, c.ERROR_TYPE: error}
        span.end()
        if run.metering:
            self._run_duration.record(time.monotonic() - run.started, metric)

    def _observe(self, run: _Run, event: Any) -> None:
        kind = event.type
        if kind == "tool_execution_start":
            self._start_tool(run, event)
        elif kind == "tool_execution_end":
            tool = run.tools.pop(event.tool_call_id, None)
            if tool is not None:
                self._end_tool(run, tool, self._tool_error(run, tool, event), event)
        elif kind == "message_end" and getattr(event.message, "role", None) == "assistant":
            run.last_assistant = event.message

    # -- model calls ------------------------------------------------------------------------

    def model_call(self, body: Callable[[], Any], model: Any, context: Any, options: Any) -> Any:
        run = _RUN.get()
        if run is not None and run.idle:
            return body()
        attributes: dict[str, Any] = {
            c.OPERATION_NAME: "chat",
            c.PROVIDER_NAME: c.provider_name(model.provider),
            c.REQUEST_MODEL: model.id,
            **c.server_attributes(model.base_url),
        }
        metric = dict(attributes)
        attributes[c.REQUEST_STREAM] = True
        if options.temperature is not None:
            attributes[c.REQUEST_TEMPERATURE] = float(options.temperature)
        if options.max_tokens is not None:
            attributes[c.REQUEST_MAX_TOKENS] = int(options.max_tokens)
        if options.session_id:
            attributes[c.CONVERSATION_ID] = options.session_id
        attributes[c.OUTPUT_TYPE] = "text" if options.output_format is None else "json"
        span = self._tracer.start_span(f"chat {model.id}", kind=SpanKind.CLIENT, attributes=attributes)
        recording = span.is_recording()
        if self.capture_content and recording:
            span.set_attribute(c.INPUT_MESSAGES, c.input_messages(context.messages))
            if context.system_prompt:
                span.set_attribute(c.SYSTEM_INSTRUCTIONS, c.system_instructions(context.system_prompt))
            if context.tools:
                span.set_attribute(c.TOOL_DEFINITIONS, c.tool_definitions(context.tools))
        metering = run.metering if run is not None else self._metering()
        started = time.monotonic()
        call = _Call(
            span=span,
            started=started,
            metric=metric,
            metering=metering,
            recording=recording,
            timing=metering or recording,
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        call_token = _CALL.set(call)
        try:
            message = body()
        except BaseException as exc:
            raised = c.error_type(exc)
            self._fail(span, raised, self._content(str(exc) or type(exc).__name__), exc)
            span.end()
            if metering:
                self._call_duration.record(time.monotonic() - started, {**metric, c.ERROR_TYPE: raised})
            raise
        finally:
            _CALL.reset(call_token)
            otel_context.detach(token)
        error = self._record_response(span, message, call, metric)
        span.end()
        if error is not None:
            metric[c.ERROR_TYPE] = error
        if metering:
            self._call_duration.record(time.monotonic() - started, metric)
        return message

    def _chunk(self, call: _Call) -> None:
        """A streamed chunk (a text, thinking or tool-call delta) arrived: the time to the first
        one (metric and span attribute), then the time since the previous one (metric)."""
        now = time.monotonic()
        last = call.last_chunk
        call.last_chunk = now
        if last is not None:
            if call.metering:
                self._per_chunk.record(now - last, call.metric)
            return
        first = now - call.started
        call.timing = call.metering  # the span wanted the first chunk only
        if call.metering:
            self._first_chunk.record(first, call.metric)
        if call.recording and call.span is not None:
            call.span.set_attribute(c.RESPONSE_TIME_TO_FIRST_CHUNK, first)

    def _record_response(self, span: Span, message: Any, call: _Call, metric: dict[str, Any]) -> Optional[str]:
        """Set the response attributes and token metrics; the call's error.type, or None."""
        usage = message.usage
        input_tokens = usage.input + usage.cache_read + usage.cache_write  # the conventions count cached ones in
        run = _RUN.get()
        if run is not None:
            run.input_tokens += input_tokens
            run.output_tokens += usage.output
        if call.recording:
            attributes: dict[str, Any] = {c.RESPONSE_FINISH_REASONS: [c.finish_reason(message.stop_reason)]}
            if message.response_id:
                attributes[c.RESPONSE_ID] = message.response_id
            response_model = message.response_model or message.model
            if response_model:
                attributes[c.RESPONSE_MODEL] = response_model
            if input_tokens or usage.output:
                attributes[c.USAGE_INPUT_TOKENS] = input_tokens
                attributes[c.USAGE_OUTPUT_TOKENS] = usage.output
                attributes[c.USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read
                attributes[c.USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write
                attributes[c.USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning
            if self.capture_content:
                attributes[c.OUTPUT_MESSAGES] = c.output_messages(message)
            span.set_attributes(attributes)  # one call: the SDK takes its lock once
        if call.metering and (input_tokens or usage.output):
            self._tokens.record(input_tokens, {**metric, c.TOKEN_TYPE: "input"})
            self._tokens.record(usage.output, {**metric, c.TOKEN_TYPE: "output"})
        error: Optional[str] = None
        if message.stop_reason == "aborted":
            error = c.ABORTED
        elif message.stop_reason == "error":
            error = call.error_type or c.OTHER
            if run is not None:
                run.error_type = error
        if error is not None:
            self._fail(span, error, self._content(message.error_message))
        return error

    def model_call_failed(self, error: BaseException) -> None:
        call = _CALL.get()
        if call is not None:
            call.error_type = c.error_type(error)

    def retry(self, attempt: int, delay: float, status: Optional[int], error: Optional[BaseException]) -> None:
        call = _CALL.get()
        if call is None or call.span is None:
            return
        attributes: dict[str, Any] = {c.RETRY_ATTEMPT: attempt, c.RETRY_DELAY: float(delay)}
        if status is not None:
            attributes[c.HTTP_STATUS_CODE] = status
            attributes[c.ERROR_TYPE] = str(status)
        elif error is not None:
            attributes[c.ERROR_TYPE] = c.error_type(error)
        call.span.add_event(c.RETRY_EVENT, attributes)

    # -- tool calls -------------------------------------------------------------------------

    def _start_tool(self, run: _Run, event: Any) -> None:
        attributes: dict[str, Any] = {
            c.OPERATION_NAME: "execute_tool",
            c.TOOL_NAME: event.tool_name,
            c.TOOL_CALL_ID: event.tool_call_id,
            c.TOOL_TYPE: "function",
        }
        description = run.descriptions.get(event.tool_name)
        if description:
            attributes[c.TOOL_DESCRIPTION] = description
        span = self._tracer.start_span(
            f"execute_tool {event.tool_name}",
            trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        if self.capture_content and span.is_recording():
            span.set_attribute(c.TOOL_CALL_ARGUMENTS, c.to_json(event.args))
        metric = {c.TOOL_NAME: event.tool_name, c.TOOL_TYPE: "function"}
        run.tools[event.tool_call_id] = _Tool(span, time.monotonic(), metric)

    def tool_call(self, execute: Callable[..., Any], call: Any) -> Callable[..., Any]:
        run = _RUN.get()
        tool = run.tools.get(call.id) if run is not None else None
        if tool is None:
            return execute

        def traced(*args: Any) -> Any:
            token = otel_context.attach(trace.set_span_in_context(tool.span))
            try:
                return execute(*args)
            except Exception as exc:
                tool.error_type = c.error_type(exc)  # read by the run thread at tool_execution_end
                raise
            finally:
                otel_context.detach(token)

        return traced

    def _tool_error(self, run: _Run, tool: _Tool, event: Any) -> Optional[str]:
        if not event.is_error:
            return None
        if run.signal is not None and run.signal.aborted:
            return c.ABORTED
        return tool.error_type or c.TOOL_ERROR

    def _end_tool(self, run: _Run, tool: _Tool, error: Optional[str], event: Any = None) -> None:
        span = tool.span
        metric = tool.metric
        content = self.capture_content and event is not None and span.is_recording()
        if error is not None:
            self._fail(span, error, c.tool_result_text(event.result.content) if content else None)
            metric = {**metric, c.ERROR_TYPE: error}
        elif content:
            span.set_attribute(c.TOOL_CALL_RESULT, c.tool_result_text(event.result.content))
        span.end()
        if run.metering:
            self._tool_duration.record(time.monotonic() - tool.started, metric)


def _histogram(meter: Any, name: str, unit: str, description: str, buckets: list) -> Histogram:
    return meter.create_histogram(name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets)
