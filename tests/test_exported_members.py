"""``piagent.__all__`` is the public surface: sorted, complete, and every name resolves."""

from __future__ import annotations

import inspect

import piagent


def test_all_is_sorted() -> None:
    assert piagent.__all__ == sorted(piagent.__all__)


def test_every_name_in_all_is_an_attribute() -> None:
    missing = [name for name in piagent.__all__ if not hasattr(piagent, name)]
    assert missing == []


def test_every_public_class_or_function_of_piagent_is_in_all() -> None:
    exported = set(piagent.__all__)
    public = {
        name
        for name, value in vars(piagent).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").split(".")[0] == "piagent"
    }
    assert sorted(public - exported) == []
