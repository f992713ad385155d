"""The loop's side of structured output (docs/loop.md#rule-29, docs/structured-output.md).

:class:`OutputTurns` follows one run: before each model call it asks for the output (the
native format in the stream options, or a forced ``final_answer`` tool); while the answer
streams it keeps the answer's text deltas, which a ``message_update``'s ``partial_output`` parses
when a listener first reads it (:class:`OutputUpdateEvent`); when the answer is complete it
judges it:

* not an answer yet (the model called other tools): the turn goes on as usual;
* accepted: the validated, converted value ends the run;
* rejected: the model is told what was wrong, in the frame of invalid tool arguments (as a
  user message, or as the error result of its ``final_answer`` call) and answers again, at
  most ``retries`` times; then the answer is marked failed (``stop_reason`` "error", the
  frame with the raw output in ``error_message``), which ends the run.

The frame quotes at most :data:`MAX_QUOTED_CHARS` characters of the rejected answer (its
start), so that a huge answer is not sent back whole with every retry. JSON with a number
out of range (``1e999999``) or ``NaN``/``Infinity`` is not JSON: it is rejected.
"""

from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from .abort import AbortSignal
from .ai.arguments_check import MAX_ARGUMENT_DEPTH
from .ai.json_stream import IncrementalJsonParser
from .ai.nesting import loads
from .ai.output import drop_absent_nulls, output_mode_for
from .ai.transcript import current_tools
from .ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .ai.validation import MAX_ERROR_CHARS, validate_json_value
from .events import MessageUpdateEvent
from .exceptions import InvalidValueError, ToolArgumentsError
from .types import AgentLoopConfig, AgentTool, OutputSpec, OutputValue, TurnContext, TurnDecision, TurnUpdate

__all__ = ["MAX_QUOTED_CHARS", "OUTPUT_TOOL_NAME", "OutputTurns", "OutputUpdateEvent", "Verdict"]

#: Characters of a rejected answer quoted back to the model (and kept in ``error_message``).
MAX_QUOTED_CHARS = 2_000

OUTPUT_TOOL_NAME = "final_answer"
_FENCED = re.compile(r"\A```[A-Za-z]*\s*\n(.*)\n\s*```\Z", re.DOTALL)
_ACCEPTED = "Final answer received."
_NOT_RUN = "Not run: the final answer ended the run."
_ANSWER_AGAIN = "Answer again with a value that matches the schema."
_UNREAD: Any = object()


@dataclass
class Verdict:
    """The judgement of one complete answer (None from :meth:`OutputTurns.judge`: not an answer).

    ``output`` when accepted; else ``feedback``, the message that tells the model what was
    wrong. ``call``: the ``final_answer`` call judged (tool mode), which gets ``results``.
    """

    output: Optional[OutputValue] = None
    feedback: Optional[UserMessage] = None
    call: Optional[ToolCall] = None
    results: list[ToolResultMessage] = field(default_factory=list)


class OutputTurns:
    """One run's structured output; used on the run thread only."""

    def __init__(self, spec: OutputSpec, tools: list[AgentTool]) -> None:
        if any(t.name == OUTPUT_TOOL_NAME for t in tools):
            raise InvalidValueError(f"a tool is named {OUTPUT_TOOL_NAME!r}, the name of the structured output's tool")
        self.spec = spec
        self.rejected = 0
        self.verdict: Optional[Verdict] = None
        self._tool_mode = False
        self._text: Optional[_PartialText] = None

    @property
    def accepted(self) -> Optional[OutputValue]:
        """The output the last answer gave, if it was accepted (the run ends with it)."""
        return self.verdict.output if self.verdict is not None else None

    def take_feedback(self) -> Optional[UserMessage]:
        """The message telling the model what was wrong with its last answer (native mode), once."""
        if self.verdict is None or self.verdict.feedback is None:
            return None
        feedback, self.verdict.feedback = self.verdict.feedback, None
        return feedback

    def hooked(self, config: AgentLoopConfig) -> AgentLoopConfig:
        """``config`` with the output taking part through the turn hooks (docs/loop.md#rule-29): an
        accepted answer ends the run as a ``finish_turn`` returning "end" does, whatever the run's
        own returned (it runs first); a rejected answer's feedback is a message ``prepare_next_turn``
        brings, ahead of the run's own."""
        finish, prepare = config.finish_turn, config.prepare_next_turn

        def finish_turn(turn: TurnContext, signal: AbortSignal) -> Optional[TurnDecision]:
            decision = finish(turn, signal) if finish is not None else None
            if self.accepted is None or decision not in (None, {"action": "continue"}):
                return decision  # an "end" ends the run anyway; anything else is the loop's error
            return {"action": "end"}

        def prepare_next_turn(turn: TurnContext, signal: AbortSignal) -> Optional[TurnUpdate]:
            feedback = self.take_feedback()
            update = prepare(turn, signal) if prepare is not None else None
            if feedback is None:
                return update
            if update is None:
                return TurnUpdate(messages=[feedback])
            return replace(update, messages=[feedback, *(update.messages or [])])

        return replace(config, finish_turn=finish_turn, prepare_next_turn=prepare_next_turn)

    @property
    def subject(self) -> str:
        return f'output "{self.spec.format.name}"'

    # -- before and during a model call ------------------------------------------------------

    def prepare(self, model: Model, context: Context, options: StreamOptions) -> None:
        """Ask for the output in this call: the native format, or the forced output tool."""
        self._tool_mode = output_mode_for(model, self.spec.mode) == "tool"
        self._text = None if self._tool_mode else _PartialText(self._unwrapped)
        self.verdict = None
        if not self._tool_mode:
            options.output_format = self.spec.format
            return
        description = "Give the final answer: call this once, when done, with the answer as its arguments."
        if self.spec.format.description:
            description += " " + self.spec.format.description
        # the request's other tools: the context's, or those its system messages declare (pi 1.6)
        others = list(context.tools or []) or current_tools(context.messages)
        context.tools = list(context.tools or []) + [Tool(OUTPUT_TOOL_NAME, description, self.spec.format.schema)]
        if options.tool_choice is None:
            options.tool_choice = "required" if others else {"name": OUTPUT_TOOL_NAME}

    def update(self, message: AssistantMessage, event: AssistantMessageEvent, partial: AssistantMessage) -> Any:
        """The ``message_update`` event of ``event`` (``message``: the snapshot of ``partial``).

        Its ``partial_output`` is the output so far if ``event`` extended it, else None. In native
        mode that is the answer's text parsed when first read (:class:`OutputUpdateEvent`): an
        update nobody reads costs one list append. In tool mode it is the ``final_answer`` call's
        arguments, which the provider parses as they stream. Either way it is the live value
        (docs/structured-output.md#streaming): a copy at every delta would make streaming a
        large output quadratic.
        """
        index = event.content_index
        if index is None or index >= len(partial.content):
            return MessageUpdateEvent(message, event)
        if self._tool_mode:
            block = partial.content[index]
            if not (event.type.startswith("toolcall_") and isinstance(block, ToolCall)):
                return MessageUpdateEvent(message, event)
            if block.name != OUTPUT_TOOL_NAME:
                return MessageUpdateEvent(message, event)
            return MessageUpdateEvent(message, event, self._unwrapped(block.arguments))
        text = self._text
        if event.type != "text_delta" or text is None or not event.delta:
            return MessageUpdateEvent(message, event)
        deltas = text.deltas
        deltas.append(event.delta)
        return OutputUpdateEvent(message, event, None, text, len(deltas))

    # -- after a model call ------------------------------------------------------------------

    def judge(self, message: AssistantMessage) -> None:
        """Judge a complete answer (not failed); sets :attr:`verdict`, may mark ``message`` failed.

        A refusal is not judged: it is the model's answer, and asking again would not change it.
        """
        if message.stop_reason == "refusal":
            return
        if self._tool_mode:
            call = next((c for c in message.tool_calls if c.name == OUTPUT_TOOL_NAME), None)
            if call is None:
                if message.tool_calls:
                    return  # other tools first
                self.verdict = self._reject(message, message.text, f"answer by calling the {OUTPUT_TOOL_NAME} tool")
                return
            self.verdict = self._check(message, call.arguments, None, call)
            return
        if message.tool_calls:
            return
        text = message.text.strip()
        fenced = _FENCED.match(text)
        try:
            data = loads(
                fenced.group(1) if fenced else text,
                "the answer",
                MAX_ARGUMENT_DEPTH,
                parse_constant=_not_json,
                parse_float=_finite,
            )
        except InvalidValueError as exc:  # nested too deep, NaN, a number out of range
            self.verdict = self._reject(message, message.text, str(exc))
            return
        except ValueError as exc:
            self.verdict = self._reject(message, message.text, f"the answer is not JSON ({exc})")
            return
        self.verdict = self._check(message, data, message.text, None)

    def _check(self, message: AssistantMessage, data: Any, raw: Optional[str], call: Optional[ToolCall]) -> Verdict:
        """Validate ``data`` (parsed from ``raw``, the answer's text, and then ours alone: coerced in
        place; None for a tool call's arguments, which the message keeps: coerced in a copy)."""
        schema = self.spec.format.schema
        shown = _quoted(raw if raw is not None else json.dumps(data, indent=2, ensure_ascii=False, default=repr))
        try:
            answer = drop_absent_nulls(data, schema)
            valid = validate_json_value(
                answer, schema, self.subject, "output", shown, keep_accepted=True, owned=raw is not None
            )
        except ToolArgumentsError as exc:
            return self._rejected(message, str(exc), call)
        unwrapped = self._unwrapped(valid)
        try:
            value = self.spec.convert(unwrapped)
        except (TypeError, ValueError) as exc:
            return self._rejected(message, self._frame(f"root: {exc}", shown), call)
        verdict = Verdict(output=OutputValue(value, unwrapped), call=call)
        if call is not None:
            verdict.results = [_result(call, _ACCEPTED, False)]
            verdict.results += [_result(c, _NOT_RUN, True) for c in message.tool_calls if c is not call]
        return verdict

    def _reject(self, message: AssistantMessage, raw: str, problem: str) -> Verdict:
        return self._rejected(message, self._frame(f"root: {problem}", _quoted(raw)), None)

    def _frame(self, line: str, shown: str) -> str:
        line = line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS] + "..."
        return f"Validation failed for {self.subject}:\n  - {line}\n\nReceived output:\n{shown}"

    def _rejected(self, message: AssistantMessage, frame: str, call: Optional[ToolCall]) -> Verdict:
        self.rejected += 1
        if self.rejected > self.spec.retries:
            message.stop_reason = "error"
            message.error_message = f"No valid output after {self.rejected} answers. {frame}"
            return Verdict()
        if call is not None:
            return Verdict(call=call, results=[_result(call, f"{frame}\n\n{_ANSWER_AGAIN}", True)])
        return Verdict(feedback=UserMessage([TextContent(f"{frame}\n\n{_ANSWER_AGAIN}")]))

    def _unwrapped(self, value: Any) -> Any:
        if self.spec.wrapped:
            return value.get("value") if isinstance(value, dict) else None
        return value


def _quoted(raw: str) -> str:
    """``raw`` as quoted in a frame: its first :data:`MAX_QUOTED_CHARS` characters."""
    if len(raw) <= MAX_QUOTED_CHARS:
        return raw
    return f"{raw[:MAX_QUOTED_CHARS]}\n[... {len(raw) - MAX_QUOTED_CHARS:,} more characters not shown]"


def _not_json(constant: str) -> Any:
    raise InvalidValueError(f"the answer is not JSON ({constant} is not a JSON number)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidValueError(f"the answer is not JSON (the number {text[:40]} is out of range)")
    return value


def _result(call: ToolCall, text: str, is_error: bool) -> ToolResultMessage:
    return ToolResultMessage(call.id, call.name, [TextContent(text)], is_error=is_error)


class _PartialText:
    """The text deltas of one native-mode answer, parsed when a partial output is read.

    Each :class:`OutputUpdateEvent` knows its position in ``deltas``; reading its output feeds
    the parser the deltas not parsed yet up to there (joined: the parser reads long runs faster
    than many short ones). The whole answer is parsed at most once, however often and however
    rarely it is read: O(delta) work per delta read. Deltas are appended on the run thread; a
    read may come from any thread (an event kept and read later), hence the lock.
    """

    def __init__(self, unwrapped: Any) -> None:
        self.unwrapped = unwrapped
        parser = IncrementalJsonParser()
        self.feed, self.value = parser.feed, parser.value
        self.deltas: list[str] = []
        self.parsed = 0  # deltas fed to the parser
        lock = threading.Lock()
        self.acquire, self.release = lock.acquire, lock.release


class OutputUpdateEvent(MessageUpdateEvent):
    """A ``message_update`` of a native-mode structured output whose ``partial_output`` is
    parsed when first read (then kept): listeners that never read it cost nothing. Read after
    later updates were, it is the live value (their output). Copied, pickled or
    ``dataclasses.replace``-d, it is read then: the copy holds that value, not the parser."""

    def __init__(
        self,
        message: AssistantMessage,
        assistant_message_event: AssistantMessageEvent,
        partial_output: Any = None,
        text: Optional[_PartialText] = None,
        position: int = 0,
    ) -> None:
        self.message = message  # the base's other fields; its __init__ would set partial_output
        self.assistant_message_event = assistant_message_event
        self._text = text  # read from ``position`` deltas of text, else partial_output
        self._position = position
        self._value: Any = partial_output if text is None else _UNREAD

    def __reduce__(self) -> tuple[Any, ...]:
        return OutputUpdateEvent, (self.message, self.assistant_message_event, self.partial_output)

    @property
    def partial_output(self) -> Any:
        value = self._value
        if value is _UNREAD:
            text, position = self._text, self._position
            assert text is not None  # _UNREAD only with a text
            text.acquire()
            try:
                parsed = text.parsed
                if position > parsed:
                    text.parsed = position
                    deltas = text.deltas
                    text.feed(deltas[parsed] if position == parsed + 1 else "".join(deltas[parsed:position]))
                value = self._value = text.unwrapped(text.value())
            finally:
                text.release()
        return value

    @partial_output.setter
    def partial_output(self, value: Any) -> None:
        self._value = value
