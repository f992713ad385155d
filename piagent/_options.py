"""Validated options (internal): the machinery behind :class:`~piagent.options.AgentOptions`.

An :class:`Option` is a typed data descriptor: ``Option(default=..., check=...)`` declared in
a subclass of :class:`Options` is a keyword-only constructor parameter and a public attribute
validated on every assignment. A bad value raises ``TypeError`` (wrong kind of object) or
``ValueError`` (right kind, bad value) with the option's name in the message, and leaves the
previous value in place. Type checkers see an ``Options`` subclass as a dataclass with
keyword-only fields (``dataclass_transform``): the parameter types are what ``check`` accepts,
the attribute types what it returns.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar, Generic, Optional, TypeVar, Union, overload

from typing_extensions import dataclass_transform

from .exceptions import InvalidTypeError, InvalidValueError

__all__ = [
    "CACHE_RETENTIONS",
    "Option",
    "Options",
    "TOOL_EXECUTION_MODES",
    "budgets_or_none",
    "callable_or_none",
    "choice",
    "executor_or_none",
    "non_negative_int",
    "non_negative_int_or_none",
    "non_negative_number_or_none",
    "optional_choice",
    "positional_arity",
    "positive_int_or_none",
    "positive_number_or_none",
    "str_or_none",
    "tool_choice_or_none",
]

T = TypeVar("T")  # the stored (attribute) type
A = TypeVar("A")  # the accepted (parameter) type
Check = Callable[[str, A], T]

TOOL_EXECUTION_MODES = ("parallel", "sequential")
REPLAY_POLICIES = ("never", "safe")
CACHE_RETENTIONS = ("none", "short", "long")


class Option(Generic[T, A]):
    """One option: a default, a check that validates (and may convert) a value, a docstring.

    ``check(name, value)`` returns the value to store or raises. The default goes through the
    check at each construction, so a list default is a new list every time.
    """

    def __init__(self, *, default: A, check: Check[A, T], doc: str = "") -> None:
        self.default = default
        self.check = check
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> Option[T, A]: ...
    @overload
    def __get__(self, obj: object, owner: Optional[type] = None) -> T: ...
    def __get__(self, obj: Optional[object], owner: Optional[type] = None) -> Union[Option[T, A], T]:
        if obj is None:
            return self
        value: T = obj.__dict__[self.name]
        return value

    def __set__(self, obj: object, value: A) -> None:
        self.store(obj.__dict__, value)

    def store(self, values: dict[str, Any], value: A) -> None:
        """Check ``value`` and put what the check returns in ``values`` (an object's ``__dict__``)."""
        values[self.name] = self.check(self.name, value)


@dataclass_transform(kw_only_default=True, eq_default=False)
class Options:
    """A base class whose subclasses declare :class:`Option` attributes; see the module docstring.

    ``cls.options()`` lists them in declaration order (base classes first). A subclass may
    define ``__post_init__(self)``, called once every option is set.
    """

    _options: ClassVar[dict[str, Option[Any, Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found: dict[str, Option[Any, Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update((name, value) for name, value in vars(klass).items() if isinstance(value, Option))
        cls._options = found

    def __init__(self, **values: Any) -> None:
        options = type(self)._options
        for name in values:
            if name not in options:
                raise InvalidTypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}")
        for name, option in options.items():
            setattr(self, name, values.get(name, option.default))
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:  # a subclass's own set-up, once every option is in place
            post_init()

    @classmethod
    def options(cls) -> dict[str, Option[Any, Any]]:
        return dict(cls._options)

    def option_values(self) -> dict[str, Any]:
        """Every option's current value, by name (lists and dicts copied one level deep)."""
        values = {}
        for name in type(self)._options:
            value = self.__dict__[name]
            values[name] = value.copy() if isinstance(value, (list, dict)) else value
        return values


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {type(value).__name__}")
    return value


def callable_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise InvalidTypeError(f"{name} must be callable or None, got {type(value).__name__}")
    return value


def choice(*allowed: str) -> Check[Any, Any]:
    def check(name: str, value: Any) -> Any:
        if value not in allowed:
            raise InvalidValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value

    return check


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int_or_none(name: str, value: Any) -> Any:
    if value is not None and (not _is_int(value) or value < 1):
        raise InvalidValueError(f"{name} must be a positive int or None, got {value!r}")
    return value


def non_negative_int(name: str, value: Any) -> Any:
    if not _is_int(value) or value < 0:
        raise InvalidValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def non_negative_int_or_none(name: str, value: Any) -> Any:
    if value is not None and (not _is_int(value) or value < 0):
        raise InvalidValueError(f"{name} must be a non-negative int or None, got {value!r}")
    return value


def positive_number_or_none(name: str, value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise InvalidValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return value


def non_negative_number_or_none(name: str, value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise InvalidValueError(f"{name} must be a non-negative number or None, got {value!r}")
    return value


def optional_choice(*allowed: str) -> Check[Any, Any]:
    """None or one of ``allowed``."""

    def check(name: str, value: Any) -> Any:
        if value is not None and value not in allowed:
            raise InvalidValueError(f"{name} must be one of {', '.join(map(repr, allowed))} or None, got {value!r}")
        return value

    return check


def instance_or_none(kind: type) -> Check[Any, Any]:
    """An instance of ``kind`` or None."""

    def check(name: str, value: Any) -> Any:
        if value is not None and not isinstance(value, kind):
            raise InvalidTypeError(f"{name} must be a {kind.__name__} or None, got {type(value).__name__}")
        return value

    return check


def str_or_none(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be a str or None, got {type(value).__name__}")
    return value


def budgets_or_none(name: str, value: Any) -> Optional[dict[str, int]]:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and _is_int(v) and v >= 0 for k, v in value.items()):
        raise InvalidValueError(f"{name} must map thinking levels to token counts (dict of str -> int), got {value!r}")
    return dict(value)


def tool_choice_or_none(name: str, value: Any) -> Any:
    """None, "auto", "none", "required", or ``{"name": <tool name>}`` (copied)."""
    if value is None or (isinstance(value, str) and value in ("auto", "none", "required")):
        return value
    if isinstance(value, dict) and set(value) == {"name"} and isinstance(value["name"], str) and value["name"]:
        return dict(value)
    raise InvalidValueError(f'{name} must be None, "auto", "none", "required" or {{"name": <tool>}}, got {value!r}')


def executor_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(getattr(value, "submit", None)):
        raise InvalidTypeError(f"{name} must be a concurrent.futures.Executor (something with submit()), got {value!r}")
    return value


_POSITIONAL: tuple[Any, ...] = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def positional_arity(fn: Callable[..., Any]) -> Optional[int]:
    """How many positional arguments ``fn`` takes; None if unlimited (``*args``) or unknown."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    count = 0
    for parameter in parameters:
        if parameter.kind == inspect.Parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in _POSITIONAL:
            count += 1
    return count
