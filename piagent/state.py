"""``AgentState``: what an :class:`~piagent.Agent` holds between and during runs.

The configuration fields (``system_prompt``, ``model``, ``thinking_level``, ``tools``,
``messages``) are the agent's options of the same names (one value, two ways to reach it:
``agent.model is agent.state.model``), validated the same way. They are read when a run
starts. Assigning ``tools`` or ``messages`` copies the list; reading them returns the live
list (appending to it changes the state).

The runtime fields are read-only. They are set when a run is claimed (on the thread that
called ``prompt()``/``continue_()``), then change only on the run thread, reduced from each
event *before* any listener sees it, and are cleared when the run settles (or by ``reset()``
while idle):

* ``is_streaming``: True from the moment a run is claimed until it fully settled;
* ``streaming_message``: the message of the last ``message_start``/``message_update``, None
  after ``message_end``, ``agent_end`` and outside runs;
* ``pending_tool_calls``: a frozenset of the ids between ``tool_execution_start`` and
  ``tool_execution_end`` (a new object on every change);
* ``error_message``: cleared when a run starts, set by a ``turn_end`` whose assistant message
  has an error message (and so by run failures), kept until the next run.

``messages`` grows on the run thread through ``message_end`` events only. Mutate the
transcript from other threads only while the agent is idle.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from collections.abc import Iterable as IterableABC
from typing import TYPE_CHECKING, Any, Optional, Union

from ._options import REPLAY_POLICIES
from .ai.capabilities import THINKING_LEVELS as MODEL_THINKING_LEVELS
from .ai.transcript import current_system_message, current_system_prompt, has_system_messages
from .ai.types import Cost, Model
from .events import AgentEvent
from .exceptions import InvalidStateError, InvalidTypeError, InvalidValueError
from .types import AgentMessage, AgentTool, ThinkingLevel

if TYPE_CHECKING:
    from .options import AgentOptions, ModelSpec

__all__ = ["PLACEHOLDER_API", "THINKING_LEVELS", "AgentState", "default_model", "is_placeholder", "resolve_model"]

#: The agent's thinking levels: "off", then the model levels (piagent/ai/capabilities.py).
THINKING_LEVELS = ("off", *MODEL_THINKING_LEVELS)

_NO_IDS: frozenset[str] = frozenset()


#: The ``api`` of the placeholder model an agent has until it is given one.
PLACEHOLDER_API = "unknown"


def default_model() -> Model:
    """pi's placeholder model: a run with it fails, its error saying how to set a model."""
    return Model(id="unknown", name="unknown", api=PLACEHOLDER_API, provider="unknown", input=[], cost=Cost())


def is_placeholder(provider: str, model_id: str) -> bool:
    """Whether ``provider:model_id`` names :func:`default_model`, which is no model: a session never records it."""
    return provider == "unknown" and model_id == "unknown"


def resolve_model(spec: object) -> Model:
    """A :class:`Model` as is, None as :func:`default_model`, ``"provider:model-id"`` from the catalogue.

    Raises :class:`~piagent.exceptions.ModelNotFoundError` for a string the catalogue does not
    know, ``TypeError`` for anything else.
    """
    if spec is None:
        return default_model()
    if isinstance(spec, Model):
        return spec
    if isinstance(spec, str):
        from .ai.models import get_model  # the catalogue is loaded on first use, not on import

        return get_model(spec)
    raise InvalidTypeError(f'model must be a Model or a "provider:model-id" string, got {type(spec).__name__}')


def _new_list(items: Optional[Iterable[Any]], expected: str) -> list[Any]:
    """``items`` copied into a new list (None: empty); TypeError naming ``expected`` for a
    string or a non-iterable."""
    if items is None:
        return []
    if isinstance(items, (str, bytes)) or not isinstance(items, IterableABC):
        raise InvalidTypeError(f"{expected}, got {type(items).__name__}")
    return list(items)


def check_tools(tools: Union[Iterable[AgentTool], AgentTool, None]) -> list[AgentTool]:
    """A new list of tools (one tool is a list of one); each needs a ``name`` and a callable
    ``execute``, names unique."""
    if isinstance(tools, AgentTool):
        tools = [tools]
    checked = _new_list(tools, "tools must be a list of tools (AgentTool, @tool functions) or one tool")
    seen: set[str] = set()
    for tool in checked:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not callable(getattr(tool, "execute", None)):
            raise InvalidTypeError(f"tools must be AgentTool objects (a name and an execute callable), got {tool!r}")
        if getattr(tool, "replay", "never") not in REPLAY_POLICIES:
            raise InvalidValueError(f"tool {name!r}: replay must be 'never' or 'safe', got {tool.replay!r}")
        if name in seen:
            raise InvalidValueError(f"two tools are named {name!r}; tool names must be unique")
        seen.add(name)
    return checked


def check_messages(messages: Optional[Iterable[AgentMessage]]) -> list[AgentMessage]:
    """A new list of messages; each must have a ``role``."""
    checked = _new_list(messages, "messages must be a list of messages")
    for message in checked:
        if getattr(message, "role", None) is None:
            raise InvalidTypeError(f"every message needs a 'role' attribute, got {type(message).__name__}")
    return checked


class AgentState:
    """The agent's transcript, configuration and runtime flags (see the module docstring)."""

    def __init__(self, options: AgentOptions) -> None:
        # the options' values and class, not the options object: an agent holds its state, and a
        # state holding the agent back would make a reference cycle, which only Python's cycle
        # collector frees (docs/architecture.md#memory)
        self._values: dict[str, Any] = vars(options)
        self._options_type = type(options)
        self._agent = weakref.ref(options)  # to set an option as the agent would, overrides included
        self._is_streaming = False
        self._streaming_message: Optional[AgentMessage] = None
        self._pending_tool_calls: frozenset[str] = _NO_IDS
        self._error_message: Optional[str] = None

    # -- configuration: the agent's options --------------------------------------------------

    @property
    def system_prompt(self) -> str:
        """The system prompt: replayed from the transcript's system messages when it has some
        (pi 1.6), else the agent's ``system_prompt`` option."""
        messages = self._values["messages"]
        if has_system_messages(messages):
            return current_system_prompt(messages)
        return self._values["system_prompt"]

    @system_prompt.setter
    def system_prompt(self, value: Optional[str]) -> None:
        """Set the option; refused when the transcript carries the prompt (system messages)."""
        if has_system_messages(self._values["messages"]):
            raise InvalidStateError(
                "the transcript carries the system prompt (it has system messages): append a SystemMessage "
                "with content or sections to change it"
            )
        self._set("system_prompt", value)

    @property
    def model(self) -> Model:
        return self._values["model"]

    @model.setter
    def model(self, value: ModelSpec) -> None:
        self._set("model", value)

    @property
    def thinking_level(self) -> ThinkingLevel:
        return self._values["thinking_level"]

    @thinking_level.setter
    def thinking_level(self, value: ThinkingLevel) -> None:
        self._set("thinking_level", value)

    @property
    def tools(self) -> list[AgentTool]:
        return self._values["tools"]

    @tools.setter
    def tools(self, value: Iterable[AgentTool]) -> None:
        self._set("tools", value)

    @property
    def messages(self) -> list[AgentMessage]:
        return self._values["messages"]

    @messages.setter
    def messages(self, value: Iterable[AgentMessage]) -> None:
        self._set("messages", value)

    def _set(self, name: str, value: Any) -> None:
        """Set an option as ``agent.<name> = value`` does (a bad value raises and changes nothing);
        once the agent is gone, through the option's own check."""
        agent = self._agent()
        if agent is not None:
            setattr(agent, name, value)
        else:
            self._options_type._options[name].store(self._values, value)

    # -- runtime (read-only) -------------------------------------------------------------

    @property
    def is_streaming(self) -> bool:
        return self._is_streaming

    @property
    def streaming_message(self) -> Optional[AgentMessage]:
        return self._streaming_message

    @property
    def pending_tool_calls(self) -> frozenset[str]:
        return self._pending_tool_calls

    @property
    def error_message(self) -> Optional[str]:
        return self._error_message

    # -- transitions (the agent calls these on the run thread) ----------------------------

    def _begin_run(self) -> None:
        self._is_streaming = True
        self._streaming_message = None
        self._error_message = None

    def _end_run(self) -> None:
        self._is_streaming = False
        self._streaming_message = None
        self._pending_tool_calls = _NO_IDS

    def _clear(self) -> None:
        """``reset()``: forget the transcript and the runtime fields, keep the configuration; a
        transcript with system messages keeps them replayed into one (pi 1.6)."""
        head = current_system_message(self._values["messages"])
        self._set("messages", [head] if head is not None else [])
        self._end_run()
        self._error_message = None

    def _reduce(self, event: AgentEvent) -> None:
        """Apply one agent event (before listeners see it)."""
        if event.type == "message_update" or event.type == "message_start":
            self._streaming_message = event.message
        elif event.type == "message_end":
            self._streaming_message = None
            self._values["messages"].append(event.message)
        elif event.type == "tool_execution_start":
            self._pending_tool_calls = self._pending_tool_calls | {event.tool_call_id}
        elif event.type == "tool_execution_end":
            self._pending_tool_calls = self._pending_tool_calls - {event.tool_call_id}
        elif event.type == "turn_end":
            message = event.message
            error = getattr(message, "error_message", None)
            if message.role == "assistant" and error:
                self._error_message = error
        elif event.type == "agent_end":
            self._streaming_message = None

    def __repr__(self) -> str:
        flags = " streaming" if self._is_streaming else ""
        model = self.model
        return (
            f"<AgentState model={model.provider}:{model.id} thinking_level={self.thinking_level!r} "
            f"tools={[t.name for t in self.tools]} messages={len(self.messages)}{flags}>"
        )
