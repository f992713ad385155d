"""``@tool``: a plain, type-hinted function as an :class:`~piagent.types.AgentTool`.

    @tool
    def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''Current weather for a city.

        Args:
            city: City name, e.g. "Paris".
            unit: Temperature unit.
        '''

The schema comes from the type hints (see :mod:`piagent.schema`), the descriptions from the
docstring. Parameters named ``signal`` and ``on_update`` are injected at call time (the
call's :class:`~piagent.abort.AbortSignal` and its update callback) and hidden from the
model. Arguments arrive validated and converted to the hinted types (:mod:`piagent.arguments`).

What the function returns becomes the result: a ``str`` is one text block; an
``AgentToolResult`` passes through; a content block, or a non-empty list of content blocks,
is the content; None is an empty result; anything else with a JSON form (dicts, lists,
numbers, dataclasses, Enums) becomes JSON text, the data kept in ``details`` and as the
result's ``structured_content`` (pi 1.6); a return hint that is an object (a dataclass, a
TypedDict, a pydantic model) gives the tool its ``output_schema``. A value with no JSON form,
like any exception the function raises, is an error result the model sees.
"""

from __future__ import annotations

import inspect
import json
import re
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union, overload

from ._options import REPLAY_POLICIES, TOOL_EXECUTION_MODES, choice, optional_choice, positive_number_or_none
from .abort import AbortSignal
from .ai.types import ImageContent, TextContent
from .arguments import Converter, converter_for
from .exceptions import InvalidTypeError, InvalidValueError
from .schema import FunctionSchema, function_schema, jsonable, resolve_hints, type_schema
from .types import AgentTool, AgentToolResult, ReplayPolicy, ToolExecutionMode, ToolUpdateCallback

__all__ = ["FunctionTool", "tool", "to_tool_result"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONTENT = (TextContent, ImageContent)
_check_execution_mode = optional_choice(*TOOL_EXECUTION_MODES)
_check_replay = choice(*REPLAY_POLICIES)


@dataclass
class FunctionTool(AgentTool):
    """An :class:`AgentTool` made by ``@tool``; calling it calls the original function.

    ``@tool`` on a method (its first parameter is ``self``) makes a tool template: read
    through an instance (``assistant.lookup``) it is a tool bound to that instance, made once
    per instance; its schema never shows ``self``. Used unbound, its calls fail with a message
    saying so.
    """

    function: Optional[Callable[..., Any]] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.function is None:
            raise InvalidTypeError(f"tool {self.name!r} has no function to call")
        return self.function(*args, **kwargs)

    def __set_name__(self, owner: type, name: str) -> None:
        self.__dict__["_attribute"] = name

    def __get__(self, instance: Any, owner: Optional[type] = None) -> Any:
        if instance is None or self.function is None or not self.__dict__.get("_method"):
            return self
        bound = _build(
            self.function.__get__(instance, owner),
            self.name,
            self.description,
            self.label,
            self.execution_mode,
            self.timeout,
            self.on_run_thread,
            self.replay,
        )
        attribute = self.__dict__.get("_attribute")
        if attribute and isinstance(getattr(instance, "__dict__", None), dict):
            instance.__dict__[attribute] = bound  # the next read finds it without this descriptor
        return bound


@overload
def tool(fn: Callable[..., Any]) -> FunctionTool: ...


@overload
def tool(
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    label: Optional[str] = None,
    execution_mode: Optional[ToolExecutionMode] = None,
    timeout: Optional[float] = None,
    on_run_thread: bool = False,
    replay: ReplayPolicy = "never",
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    label: Optional[str] = None,
    execution_mode: Optional[ToolExecutionMode] = None,
    timeout: Optional[float] = None,
    on_run_thread: bool = False,
    replay: ReplayPolicy = "never",
) -> Union[FunctionTool, Callable[[Callable[..., Any]], FunctionTool]]:
    """Turn a function into an :class:`AgentTool`; use bare (``@tool``) or with options.

    ``name`` defaults to the function's name (letters, digits, ``_`` and ``-``, at most 64),
    ``description`` to the docstring's description, ``label`` to the name.
    ``execution_mode="sequential"`` makes any batch containing the tool run sequentially;
    ``timeout`` (seconds) turns a longer call into an error result (the call's signal is
    aborted and its thread left to finish). ``on_run_thread=True`` runs the tool on the run
    thread instead of a worker (thread-locals, the caller's database transaction): its batches
    run sequentially, and an abort waits for it (docs/architecture.md#the-thread-contract); it
    cannot be combined with ``timeout``. ``replay="safe"`` says running a call again is harmless
    (a read-only tool): recovery may redo a call whose outcome was lost; the default
    ``"never"`` forbids it. Raises TypeError/ValueError at decoration time for a
    hint with no JSON form, ``*args``, an async or generator function, or bad options.
    """
    _check_execution_mode("execution_mode", execution_mode)
    _check_replay("replay", replay)
    positive_number_or_none("timeout", timeout)
    if not isinstance(on_run_thread, bool):
        raise InvalidTypeError(f"on_run_thread must be a bool, not {type(on_run_thread).__name__}")
    if on_run_thread and timeout is not None:
        raise InvalidValueError(
            "on_run_thread=True cannot be combined with timeout: a call on the run thread cannot be left behind"
        )

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        if not callable(function):
            raise InvalidTypeError(f"@tool decorates a function, not {type(function).__name__}")
        return _build(function, name, description, label, execution_mode, timeout, on_run_thread, replay)

    if fn is None:
        return decorate
    if not callable(fn):
        raise InvalidTypeError(
            f"@tool decorates a function, not {type(fn).__name__} (options are keyword-only: @tool(name=...))"
        )
    return decorate(fn)


def _build(
    fn: Callable[..., Any],
    name: Optional[str],
    description: Optional[str],
    label: Optional[str],
    execution_mode: Optional[ToolExecutionMode],
    timeout: Optional[float],
    on_run_thread: bool = False,
    replay: ReplayPolicy = "never",
) -> FunctionTool:
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not _NAME.match(tool_name):
        raise InvalidValueError(
            f"tool name {tool_name!r} is not allowed: use 1-64 letters, digits, '_' or '-' (pass name=...)"
        )
    owner = f"tool {tool_name!r}"
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise InvalidTypeError(
            f"{owner}: async functions are not supported; piagent runs tools on threads, write a plain def"
        )
    if inspect.isgeneratorfunction(fn):
        raise InvalidTypeError(
            f"{owner}: generator functions are not supported; report progress with an on_update parameter"
        )
    method = _is_method(fn)
    schema = function_schema(types.MethodType(fn, _UNBOUND) if method else fn, owner)
    execute: Any = _unbound_call(tool_name, fn) if method else _Caller(fn, schema, tool_name)
    made = FunctionTool(
        name=tool_name,
        description=description if description is not None else schema.description,
        parameters=schema.parameters,
        execute=execute,
        label=label if label is not None else tool_name,
        output_schema=_output_schema(fn, owner),
        execution_mode=execution_mode,
        timeout=timeout,
        on_run_thread=on_run_thread,
        replay=replay,
        function=fn,
    )
    made.__dict__["_method"] = method
    return made


_UNBOUND = object()


def _output_schema(fn: Callable[..., Any], owner: str) -> Optional[dict[str, Any]]:
    """The tool's ``output_schema`` (pi 1.6): the JSON Schema of its return hint when that is an
    object (a dataclass, a TypedDict, a pydantic model, a dict), the structured content of its
    results; None for text, content blocks, results and hints with no JSON form."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__  # as function_schema
    hint = resolve_hints(target, owner).get("return")
    if hint is None or hint is AgentToolResult:
        return None
    try:
        schema = type_schema(hint)
    except (TypeError, ValueError):
        return None
    return schema if schema.get("type") == "object" else None


def _is_method(fn: Callable[..., Any]) -> bool:
    """A plain function defined in a class body whose first parameter is ``self``."""
    if not inspect.isfunction(fn):
        return False
    params = list(inspect.signature(fn).parameters)
    where, _, _ = fn.__qualname__.rpartition(".")
    return bool(params) and params[0] == "self" and bool(where) and not where.endswith("<locals>")


def _unbound_call(name: str, fn: Callable[..., Any]) -> Callable[..., AgentToolResult]:
    def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: ToolUpdateCallback) -> AgentToolResult:
        owner = fn.__qualname__.rpartition(".")[0]
        raise InvalidTypeError(
            f"tool {name!r} is a method of {owner}: give the agent the tool of an instance "
            f"(e.g. {owner}().{fn.__name__}), not {owner}.{fn.__name__}"
        )

    return execute


class _Caller:
    """The tool's ``execute``: arguments to a Python call, the return value to a result."""

    def __init__(self, fn: Callable[..., Any], schema: FunctionSchema, name: str) -> None:
        self.fn = fn
        self.name = name
        self.params = [(p.name, p.kind, p.default, converter_for(p.hint)) for p in schema.params]
        self.injected = schema.injected
        self.extra: Optional[tuple[str, Optional[Converter]]] = None
        if schema.extra is not None:
            self.extra = (schema.extra[0], converter_for(schema.extra[1]))
        self.known = {p.name for p in schema.params}

    def __call__(
        self, tool_call_id: str, args: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> AgentToolResult:
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise InvalidTypeError(f"Tool {self.name} expects an object of arguments, got {type(args).__name__}")
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for name, kind, default, convert in self.params:
            present = name in args
            value = args.get(name, default)
            if present and convert is not None:
                value = convert(value)
            if kind is inspect.Parameter.POSITIONAL_ONLY:
                positional.append(value)
            elif present:
                keywords[name] = value
        if self.extra is not None:
            convert_extra = self.extra[1]
            for key, value in args.items():
                if key not in self.known:
                    keywords[key] = convert_extra(value) if convert_extra is not None else value
        injected = {"signal": signal, "on_update": on_update}
        for name in self.injected:
            keywords[name] = injected[name]
        return to_tool_result(self.fn(*positional, **keywords), self.name)


def to_tool_result(value: Any, tool_name: str = "tool") -> AgentToolResult:
    """A function's return value as an :class:`AgentToolResult` (rules in the module docstring).

    Raises TypeError (naming the type) for a value with no JSON form.
    """
    if isinstance(value, AgentToolResult):
        return value
    if value is None:
        return AgentToolResult()
    if isinstance(value, str):
        return AgentToolResult([TextContent(value)])
    if isinstance(value, _CONTENT):
        return AgentToolResult([value])
    if isinstance(value, list) and value and all(isinstance(item, _CONTENT) for item in value):
        return AgentToolResult(list(value))
    try:
        data = jsonable(value)
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(
            f"Tool {tool_name} returned a value of type {type(value).__name__} that cannot be sent to the model "
            f"({exc}); return a str, content blocks, an AgentToolResult or JSON-serialisable data"
        ) from None
    return AgentToolResult([TextContent(text)], details=data, structured_content=data)
