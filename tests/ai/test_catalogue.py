"""The generated catalogue: complete against the official SDKs, current, loadable, documented."""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
import typing
from pathlib import Path

import pytest

from piagent.ai.capabilities import Capabilities, effort_for
from piagent.ai.models import CATALOGUE_FILE, custom_model, get_model, get_models, load_catalogue, unregister_model
from piagent.exceptions import ModelNotFoundError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import catalogue_families as hand  # noqa: E402 -- importable once scripts/ is on the path
import generate_catalogue as generator  # noqa: E402 -- likewise

from piagent.ai import _catalogue_build as builder  # noqa: E402 (beside the script whose code it is)

CATALOGUE = json.loads(CATALOGUE_FILE.read_text())
GENERATED = datetime.date.fromisoformat(CATALOGUE["generated"])


pytestmark = pytest.mark.usefixtures("fresh_warnings")


def _sdk_ids(alias: typing.Any) -> list[str]:
    return builder.literal_values(alias)


def _missing(provider: str, ids: list[str], shutdown: dict[str, str]) -> list[str]:
    known = {m.id for m in get_models(provider)}
    aliases = {a for row in CATALOGUE["models"][provider] for a in row.get("aliases", [])}
    missing = []
    for model_id in ids:
        if model_id in known or model_id in aliases:
            continue
        if shutdown.get(model_id, "9999") <= GENERATED.isoformat():
            continue  # shut down before the catalogue was made
        if provider == "openai" and builder.excluded(model_id):
            continue  # documented exclusion (scripts/catalogue_families.py)
        missing.append(model_id)
    return missing


def test_every_current_anthropic_model_of_the_sdk_is_in_the_catalogue():
    anthropic = pytest.importorskip("anthropic")
    ids, shutdown, _ = builder.anthropic_ids()
    assert ids, f"anthropic {anthropic.__version__} lists no models: the SDK changed its types"
    assert _missing("anthropic", ids, shutdown) == [], "run `make catalogue`"


def test_every_current_openai_model_of_the_sdk_is_in_the_catalogue():
    pytest.importorskip("openai")
    ids, shutdown, _ = builder.openai_ids()
    assert len(ids) > 50
    assert _missing("openai", ids, shutdown) == [], "run `make catalogue`"


def test_gemini_models_the_sdk_names_are_in_the_catalogue():
    """The SDK has no model list; its table of current models' tokenizers names the newest."""
    genai = pytest.importorskip("google.genai")
    source = (Path(genai.__file__).parent / "_local_tokenizer_loader.py").read_text()
    table = source[source.index("_GEMINI_MODELS_TO_HUGGINGFACE_TOKENIZER_NAMES") :]
    current = re.findall(r'"(gemini-[^"]+)"', table[: table.index("}")])
    known = {m.id for m in get_models("google")}
    assert current and set(current) <= known


def test_the_readme_table_is_the_one_the_catalogue_generates():
    readme = (ROOT / "README.md").read_text()
    start = readme.index(generator.TABLE_START) + len(generator.TABLE_START)
    assert readme[start : readme.index(generator.TABLE_END)].strip() == generator.readme_table(CATALOGUE)


def test_every_family_and_model_override_is_valid_capabilities():
    for families in CATALOGUE["families"].values():
        for family in families.values():
            Capabilities.from_dict(family["capabilities"])
    for model in get_models("anthropic") + get_models("openai") + get_models("google") + get_models("deepseek"):
        assert model.capabilities is not None and model.family, model.id
        assert model.reasoning == (model.capabilities.thinking != "none")


def test_capabilities_stay_immutable_and_hashable_with_an_effort_map():
    """Capabilities are a frozen value: every catalogue model's can be hashed, and the effort
    map (DeepSeek's own level mapping) cannot be changed in place behind the model's back."""
    for model in get_models("anthropic") + get_models("openai") + get_models("google") + get_models("deepseek"):
        hash(model.capabilities)
    caps = get_model("deepseek:deepseek-v4-pro").capabilities
    assert caps is not None and caps.to_dict()["effort_map"] == {"xhigh": "high"}
    with pytest.raises(TypeError):
        caps.effort_map["xhigh"] = "max"  # type: ignore[index]
    assert Capabilities.from_dict(caps.to_dict()) == caps


def test_no_catalogue_model_was_shut_down_when_it_was_generated():
    for rows in CATALOGUE["models"].values():
        for row in rows:
            assert row.get("shutdown", "9999") > CATALOGUE["generated"], row["id"]


def test_a_retiring_model_warns_once_with_date_and_successor(caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    get_model("openai:gpt-5")
    get_model("openai:gpt-5")
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("openai:gpt-5 ")]
    # "is deprecated and shuts down on" before the date, "was shut down on" after it
    assert len(warnings) == 1 and warnings[0].endswith(" on 2026-12-11; use openai:gpt-5.6-sol")


@pytest.mark.parametrize(
    "ref, message",
    [
        ("google:gemini-2.5-pro", "google:gemini-2.5-pro was shut down on 2026-12-01; use google:gemini-3.8-flash"),
        (
            "google:gemini-2.5-flash",
            "google:gemini-2.5-flash was shut down on 2026-12-01; use google:gemini-3.5-flash-lite",
        ),
        ("openai:o4-mini", "openai:o4-mini was shut down on 2026-10-23"),
    ],
)
def test_a_model_shut_down_before_the_catalogue_was_made_is_refused_naming_date_and_successor(ref, message):
    """Not offered, nor driven like a sibling of its family: get_model says when it stopped."""
    with pytest.raises(ModelNotFoundError) as caught:
        get_model(ref)
    assert str(caught.value) == message


def test_a_model_before_its_shutdown_date_says_when_it_shuts_down(caplog):
    from piagent.ai.models import _warn_if_retiring

    caplog.set_level(logging.WARNING, logger="piagent")
    _warn_if_retiring(get_model("openai:o3"), today=datetime.date(2026, 12, 10))
    assert "openai:o3 is deprecated and shuts down on 2026-12-11; use openai:gpt-5.6-sol" in caplog.text


def test_a_model_past_its_shutdown_date_says_it_was_shut_down(caplog):
    from piagent.ai.models import _warn_if_retiring

    caplog.set_level(logging.WARNING, logger="piagent")
    _warn_if_retiring(get_model("openai:o3"), today=datetime.date(2026, 12, 12))
    assert "openai:o3 was shut down on 2026-12-11; use openai:gpt-5.6-sol" in caplog.text


@pytest.mark.parametrize(
    "ref, like",
    [
        ("anthropic:claude-opus-6", "claude-opus-5-5"),
        ("anthropic:claude-fable-6", "claude-fable-5-2"),
        ("openai:gpt-5.7-sol", "gpt-5.6-sol"),
        ("google:gemini-3.9-flash", "gemini-3.8-flash"),
        ("deepseek:deepseek-v4-ultra", "deepseek-v4-pro"),
    ],
)
def test_an_unknown_id_is_driven_like_its_familys_newest_model(ref, like, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    provider, model_id = ref.split(":")
    model = get_model(ref)
    known = get_model(provider, like)
    assert model.id == model_id and model.capabilities == known.capabilities and model.cost == known.cost
    assert f"driving it like {provider}:{like}" in caplog.text


def test_a_newer_catalogue_file_is_loaded_without_upgrading(tmp_path):
    newer = json.loads(CATALOGUE_FILE.read_text())
    row = dict(newer["models"]["anthropic"][0], id="claude-opus-9", name="Claude Opus 9")
    newer["models"] = {"anthropic": [row]}
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(newer))
    try:
        assert load_catalogue(path) == 1
        model = get_model("anthropic:claude-opus-9")
        assert model.name == "Claude Opus 9" and model.family == row["family"]
        assert get_model("anthropic:claude-opus-4-8").id == "claude-opus-4-8"  # the rest stays
    finally:
        unregister_model("anthropic", "claude-opus-9")


def test_a_catalogue_loaded_in_place_of_the_built_in_one_keeps_the_models_registered_by_hand():
    newer = json.loads(CATALOGUE_FILE.read_text())
    row = dict(newer["models"]["anthropic"][0], id="claude-opus-9", name="Claude Opus 9")
    newer["models"] = {"anthropic": [row]}
    mine = custom_model("my-model", "http://127.0.0.1:9/v1", provider="mybox")
    mine_too = custom_model("gpt-5.5", "http://127.0.0.1:9/v1", provider="openai", name="my gpt-5.5")
    try:
        assert load_catalogue(newer, replace=True) == 1
        assert [m.id for m in get_models("anthropic")] == ["claude-opus-9"]  # the built-in ones are gone
        assert get_model("mybox:my-model") == mine and get_model("openai:gpt-5.5") == mine_too
        assert load_catalogue(CATALOGUE_FILE) > 1
        assert get_model("openai:gpt-5.5").name == "my gpt-5.5"  # a model registered by hand stays
    finally:
        unregister_model("mybox", "my-model")
        unregister_model("openai", "gpt-5.5")
        load_catalogue(CATALOGUE_FILE, replace=True)
    assert get_model("openai:gpt-5.5").base_url == "https://api.openai.com/v1"
    assert "claude-opus-9" not in [m.id for m in get_models("anthropic")]


def test_a_catalogue_of_another_format_is_refused_before_anything_changes(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": 99, "models": {}}))
    with pytest.raises(ValueError, match="format 99"):
        load_catalogue(path)
    bad = {"format": 1, "families": {}, "models": {"anthropic": [{"id": "x", "family": "nope"}]}}
    with pytest.raises(ValueError, match="unknown family 'nope'"):
        load_catalogue(bad)
    assert get_model("anthropic:claude-opus-4-8").family == "claude-adaptive"


def test_custom_model_takes_the_same_capability_fields():
    model = custom_model(
        "my-reasoner",
        "http://127.0.0.1:9/v1",
        capabilities={"thinking": "effort", "efforts": ["low", "high"], "sampling": "never"},
        register=False,
    )
    assert model.reasoning and model.capabilities == Capabilities(
        thinking="effort", efforts=("low", "high"), sampling="never"
    )
    with pytest.raises(ValueError, match="unknown capability fields"):
        custom_model("x", "http://127.0.0.1:9", capabilities={"thinkng": "effort"}, register=False)


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"thinking": "adaptive", "thinking_off": "disable"}, "thinking_off"),
        ({"thinking": "effort", "max_tokens_field": "max_token"}, "max_tokens_field"),
        ({"thinking": "effort", "sampling": "sometimes"}, "sampling"),
        ({"thinking": "adaptiv"}, "thinking"),
    ],
)
def test_a_misspelt_capability_value_is_a_clear_error_not_a_silently_different_request(fields, named):
    with pytest.raises(ValueError, match=named):
        custom_model("x", "http://127.0.0.1:9", capabilities=fields, register=False)


@pytest.mark.parametrize(
    "level, efforts, expected",
    [
        ("minimal", ("none", "low", "medium", "high", "xhigh", "max"), "low"),
        ("xhigh", ("low", "medium", "high"), "high"),
        ("max", ("none", "low", "medium", "high", "xhigh", "max"), "max"),
        ("medium", ("low", "high", "max"), "high"),
        ("max", ("minimal", "low", "medium", "high"), "high"),
        ("minimal", ("minimal", "low", "medium", "high"), "minimal"),
    ],
)
def test_a_level_the_model_lacks_rounds_up_to_the_next_it_has(level, efforts, expected):
    assert effort_for(level, efforts) == expected


def test_the_generator_reads_dates_the_way_the_sdks_write_them():
    assert builder.parse_long_date("January 22nd, 2027") == "2027-01-22"
    assert builder.parse_long_date("June 30th, 2026") == "2026-06-30"
    assert re.match(builder.DATED, "gpt-5.5-2026-04-23").group("base") == "gpt-5.5"


def test_every_hand_family_cites_its_source():
    for table in (hand.ANTHROPIC, hand.OPENAI, hand.GOOGLE, hand.DEEPSEEK):
        for family in table.values():
            assert family["doc"]
