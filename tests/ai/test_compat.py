"""``model.compat``: every flag checked against the known ones and their values wherever a user
sets it; catalogue data keeps what this piagent knows and warns about the rest."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from piagent.ai import compat as compat_module
from piagent.ai import custom_model, get_model, get_models, get_providers, load_catalogue
from piagent.ai._model_data import PROVIDERS
from piagent.ai.compat import COMPAT_FLAGS, check_compat, parse_compat_value
from piagent.ai.models import CATALOGUE_FILE, unregister_model
from piagent.ai.provider_kit import register_compat_flag
from piagent.ai.providers.openai_completions import resolve_compat
from piagent.ai.types import Model
from piagent.exceptions import InvalidTypeError, InvalidValueError

URL = "http://127.0.0.1:9/v1"


def test_an_unknown_flag_is_refused_naming_the_closest_known_one() -> None:
    with pytest.raises(InvalidValueError) as info:
        custom_model("m1", base_url=URL, compat={"supports_null_contnet": True}, register=False)
    message = str(info.value)
    assert message.startswith("unknown compat flag 'supports_null_contnet': did you mean 'supports_null_content'?")
    assert "known flags: max_tokens_field, send_reasoning_back," in message


def test_an_unknown_flag_unlike_any_known_one_lists_them_all() -> None:
    with pytest.raises(InvalidValueError, match=r"^unknown compat flag 'colour': known flags: max_tokens_field, "):
        custom_model("m1", base_url=URL, compat={"colour": "blue"}, register=False)


@pytest.mark.parametrize(
    "compat, error, message",
    [
        (
            {"supports_null_content": "maybe"},
            InvalidTypeError,
            "compat flag 'supports_null_content' must be True or False; got 'maybe'",
        ),
        ({"supports_null_content": 1}, InvalidTypeError, "compat flag 'supports_null_content' must be True or False"),
        (
            {"structured_output_form": "json"},
            InvalidValueError,
            "compat flag 'structured_output_form' must be 'json_schema' or 'json_object'; got 'json'",
        ),
        ({"tool_call_ids": True}, InvalidTypeError, "compat flag 'tool_call_ids' must be 'openai' or 'mistral'"),
        ({1: True}, InvalidTypeError, "compat keys are flag names (strings); got 1"),
        ("supports_null_content", InvalidTypeError, "compat must be a dict of flags"),
    ],
)
def test_a_value_the_flag_does_not_take_is_refused_listing_its_values(compat: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        custom_model("m1", base_url=URL, compat=compat, register=False)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    "set_compat",
    [
        lambda model, compat: Model("m1", compat=compat),
        lambda model, compat: dataclasses.replace(model, compat=compat),
        lambda model, compat: setattr(model, "compat", compat),
        lambda model, compat: setattr(model, "compat", {**(model.compat or {}), **compat}),
    ],
    ids=["Model", "replace", "assignment", "merged"],
)
def test_compat_is_checked_however_it_is_set(set_compat: Any) -> None:
    model = custom_model("m1", base_url=URL, compat={"supports_null_content": True}, register=False)
    with pytest.raises(InvalidValueError, match="did you mean 'streams_tool_choice_auto'"):
        set_compat(model, {"stream_tool_choice_auto": False})
    assert model.compat == {"supports_null_content": True}


def test_every_known_flag_with_each_of_its_values_is_taken_as_given() -> None:
    for key, values in COMPAT_FLAGS.items():
        for value in values:
            model = custom_model("m1", base_url=URL, compat={key: value}, register=False)
            assert model.compat == {key: value} and model.compat[key] is value


def test_every_flag_the_chat_completions_provider_resolves_is_a_known_flag() -> None:
    for model in (custom_model("m1", base_url=URL, register=False), get_model("mistral:mistral-large-latest")):
        resolved = resolve_compat(model)
        assert set(resolved) <= set(COMPAT_FLAGS)
        assert check_compat(resolved) == resolved


def test_the_built_in_catalogue_loads_with_every_compat_it_declares() -> None:
    rows = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))["models"]
    declared_somewhere = []
    for provider in get_providers():
        by_id = {row["id"]: row for row in rows.get(provider, [])}
        for model in get_models(provider):
            declared = by_id.get(model.id, {}).get("compat", PROVIDERS.get(provider, {}).get("compat"))
            assert model.compat == declared, f"{provider}:{model.id}"
            if declared:
                assert check_compat(declared) == declared
                declared_somewhere.append(provider)
    assert {"openrouter", "mistral"} <= set(declared_somewhere)


def test_a_catalogue_flag_this_piagent_does_not_know_is_left_out_with_a_warning(
    fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalogue written by a newer piagent must not stop an older one from loading it."""
    newer = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    compat = {"max_tokens_field": "max_tokens", "supports_thought_replay": True, "tool_call_ids": "uuid"}
    newer["models"] = {"mistral": [{"id": "mistral-next", "compat": compat}]}
    try:
        with caplog.at_level(logging.WARNING, logger="piagent"):
            assert load_catalogue(newer) == 1
        assert get_model("mistral:mistral-next").compat == {"max_tokens_field": "max_tokens"}
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 2
        assert warnings[0].startswith(
            "catalogue model mistral:mistral-next: unknown compat flag 'supports_thought_replay'"
        )
        assert warnings[1].startswith("catalogue model mistral:mistral-next: compat flag 'tool_call_ids' must be")
        assert all(w.endswith("; left out (a newer piagent may know it)") for w in warnings)
    finally:
        unregister_model("mistral", "mistral-next")


def test_a_provider_declares_the_flags_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat_module, "COMPAT_FLAGS", dict(COMPAT_FLAGS))
    with pytest.raises(InvalidValueError, match="unknown compat flag 'acme_dialect'"):
        custom_model("m1", base_url=URL, api="acme-chat", compat={"acme_dialect": "v2"}, register=False)
    register_compat_flag("acme_dialect", ("v1", "v2"))
    model = custom_model("m1", base_url=URL, api="acme-chat", compat={"acme_dialect": "v2"}, register=False)
    assert model.compat == {"acme_dialect": "v2"}
    with pytest.raises(InvalidValueError, match="must be 'v1' or 'v2'; got 'v3'"):
        model.compat = {"acme_dialect": "v3"}
    with pytest.raises(InvalidValueError, match="already declared with the values True or False"):
        register_compat_flag("supports_null_content", ("yes", "no"))


@pytest.mark.parametrize(
    "key, text, value",
    [
        ("supports_null_content", "true", True),
        ("supports_null_content", "True", True),
        ("supports_null_content", "1", True),
        ("supports_null_content", "false", False),
        ("supports_null_content", "FALSE", False),
        ("supports_null_content", "0", False),
        ("structured_output_form", "json_object", "json_object"),
        ("structured_output_form", '"json_object"', "json_object"),  # JSON, as the option was read before
    ],
)
def test_a_value_written_as_text_is_read_as_its_flags_type(key: str, text: str, value: Any) -> None:
    parsed = parse_compat_value(key, text)
    assert parsed == value and type(parsed) is type(value)


def test_a_bad_value_written_as_text_is_refused_in_command_line_spelling() -> None:
    with pytest.raises(InvalidTypeError, match="^compat flag 'supports_null_content' must be true or false; got 'yes'"):
        parse_compat_value("supports_null_content", "yes")
    with pytest.raises(InvalidValueError, match="must be json_schema or json_object; got 'xml'"):
        parse_compat_value("structured_output_form", "xml")
