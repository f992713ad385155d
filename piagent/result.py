"""``RunResult``: what ``Agent.prompt()`` and ``Agent.continue_()`` return."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Optional, cast

from typing_extensions import TypeVar

from .ai.display import messages_html
from .ai.types import AssistantMessage, StopReason, Usage
from .exceptions import OutputError
from .types import AgentMessage, OutputValue

__all__ = ["RunResult"]

_PREVIEW = 60

OutputT = TypeVar("OutputT", default=Any)


@dataclass(repr=False)
class RunResult(Generic[OutputT]):
    """One run's outcome; ``RunResult[T]`` for a run with ``output_type=T``.

    ``messages``: the messages the run added to the transcript, in order (prompts, injected
    steering/follow-up messages, assistant messages, tool results, a failure message).
    ``text``: the final assistant message's text ("" if none). ``stop_reason`` and
    ``error_message``: the final assistant message's (None if there is none). ``usage``: the
    sum over the run's assistant messages. ``output``: the structured output (see there).
    """

    messages: list[AgentMessage] = field(default_factory=list)
    text: str = ""
    stop_reason: Optional[StopReason] = None
    error_message: Optional[str] = None
    usage: Usage = field(default_factory=Usage)
    structured: Optional[OutputValue] = None
    """The structured output (value and validated JSON) when the run produced one."""
    output_expected: bool = False
    """True when the run had an ``output_type``."""

    @property
    def output(self) -> OutputT:
        """The validated, converted output of a run with an ``output_type`` (None without one).

        Raises :class:`~piagent.exceptions.OutputError` (keeping ``error_message`` and the
        raw ``text``) when the run had an ``output_type`` and ended without a valid output:
        retries used up, a refusal, a model error, an abort, ``max_turns``
        (docs/structured-output.md#validation-and-retries).
        """
        if self.structured is not None:
            return cast(OutputT, self.structured.value)
        if self.output_expected:
            if self.stop_reason == "refusal":
                reason = f"the model refused: {self.text}"
            else:
                reason = self.error_message or f"the run ended ({self.stop_reason}) before the output was given"
            raise OutputError(f"No structured output: {reason}", self.text)
        return cast(OutputT, None)

    @classmethod
    def from_messages(
        cls, messages: Sequence[AgentMessage], output: Optional[OutputValue] = None, output_expected: bool = False
    ) -> RunResult[Any]:
        usage = Usage()
        final = None
        for message in messages:
            if isinstance(message, AssistantMessage):
                usage.add(message.usage)
                final = message
        if final is None:
            return cls(list(messages), usage=usage, structured=output, output_expected=output_expected)
        return cls(list(messages), final.text, final.stop_reason, final.error_message, usage, output, output_expected)

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= _PREVIEW else self.text[: _PREVIEW - 1] + "…"
        parts = [f"stop_reason={self.stop_reason!r}", f"text={text!r}"]
        if self.error_message:
            parts.append(f"error_message={self.error_message!r}")
        if self.structured is not None:
            parts.append(f"output={self.structured.value!r}")
        parts.append(f"messages={len(self.messages)}")
        parts.append(f"tokens={self.usage.total_tokens}")
        return f"RunResult({', '.join(parts)})"

    def _repr_html_(self) -> str:
        """How Jupyter shows a run: a one-line summary, then its messages (escaped, see
        :mod:`piagent.ai.display`)."""
        summary = (
            f"{self.stop_reason or 'no answer'} · {len(self.messages)} messages · {self.usage.total_tokens} tokens"
        )
        if self.error_message:
            summary += f" · {self.error_message}"
        return (
            f'<div class="piagent-run"><div style="font-family:sans-serif;font-size:85%;color:#666">'
            f"run: {html.escape(summary)}</div>{messages_html(self.messages)}</div>"
        )
