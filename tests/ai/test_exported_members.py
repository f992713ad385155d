"""``piagent.ai.__all__`` is the LLM layer's public surface: sorted, complete, and every name resolves."""

from __future__ import annotations

import inspect

import piagent.ai
from piagent.ai import models, registry


def test_all_is_sorted() -> None:
    assert piagent.ai.__all__ == sorted(piagent.ai.__all__)


def test_every_name_in_all_is_an_attribute() -> None:
    missing = [name for name in piagent.ai.__all__ if not hasattr(piagent.ai, name)]
    assert missing == []


def test_every_public_class_or_function_of_piagent_ai_is_in_all() -> None:
    exported = set(piagent.ai.__all__)
    public = {
        name
        for name, value in vars(piagent.ai).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").split(".")[0] == "piagent"
    }
    assert sorted(public - exported) == []


def test_the_catalogue_functions_are_all_exported() -> None:
    assert [name for name in models.__all__ if name[0].islower() and name not in piagent.ai.__all__] == []


def test_stream_is_the_function_not_the_submodule_of_the_same_name() -> None:
    assert piagent.ai.stream is registry.stream
