"""Building the model catalogue from the official SDKs and genai-prices installed here.

Used by ``make catalogue`` (``scripts/generate_catalogue.py``: the built-in catalogue) and by
:func:`piagent.ai.refresh_catalogue` (a user-level catalogue, docs/models.md#refreshing-the-catalogue).
Sources:

* model ids and shutdown dates: the official SDKs' model lists -- ``anthropic`` (``types.Model``
  and ``_data.DEPRECATED_MODELS``) and ``openai`` (``ChatModel`` / ``ResponsesModel`` and the
  "Announced shutdown date" notes of ``ChatModel``); Gemini and DeepSeek publish no list in
  their SDKs, so their ids are the ones the rules name;
* prices and context windows: ``genai-prices`` (kept by the Pydantic team);
* capabilities (thinking control, effort values, what a model rejects) and successors: the
  per-family rules, which always come from the package: ``catalogue_rules.json`` beside this
  module, every upper-case name of ``scripts/catalogue_families.py`` (written by hand from each
  provider's docs, cited there), read here as ``hand``.

The output is deterministic: built twice on one day from the same packages, the same dict.
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import json
import re
import typing
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from ..exceptions import InvalidValueError

__all__ = [
    "DATED",
    "RULES_FILE",
    "SOURCES",
    "anthropic_ids",
    "build",
    "excluded",
    "literal_values",
    "missing_sources",
    "openai_ids",
    "parse_long_date",
    "reload_rules",
]

RULES_FILE = Path(__file__).with_name("catalogue_rules.json")
#: The packages a catalogue is built from: (import name, distribution name).
SOURCES = (("anthropic", "anthropic"), ("openai", "openai"), ("genai_prices", "genai-prices"))
DATED = re.compile(r"^(?P<base>.+?)-(?P<date>\d{4}-\d{2}-\d{2}|\d{8})$")


def _read_rules() -> Any:
    return SimpleNamespace(**json.loads(RULES_FILE.read_text(encoding="utf-8")))


#: The per-family rules, by their names in scripts/catalogue_families.py.
hand: Any = _read_rules()


def reload_rules() -> None:
    """Read :data:`RULES_FILE` again (``make catalogue`` has just rewritten it)."""
    global hand
    hand = _read_rules()


def missing_sources() -> list[str]:
    """The distributions of :data:`SOURCES` that cannot be imported here."""
    missing = []
    for module, dist in SOURCES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    return missing


def literal_values(alias: Any) -> list[str]:
    """The string literals of an SDK's ``Union[Literal[...], str]`` model alias, in order."""
    out: list[str] = []
    for arg in typing.get_args(alias) or (alias,):
        if typing.get_origin(arg) is typing.Literal:
            out.extend(a for a in typing.get_args(arg) if isinstance(a, str))
        elif typing.get_args(arg):
            out.extend(literal_values(arg))
    return list(dict.fromkeys(out))


def anthropic_ids() -> tuple[list[str], dict[str, str], str]:
    import anthropic
    from anthropic._data import DEPRECATED_MODELS
    from anthropic.types import Model

    shutdown = {model: parse_long_date(text) for model, text in DEPRECATED_MODELS.items()}
    return literal_values(Model), shutdown, anthropic.__version__


def parse_long_date(text: str) -> str:
    """``"January 22nd, 2027"`` -> ``"2027-01-22"``."""
    cleaned = re.sub(r"(\d+)(st|nd|rd|th)", r"\1", text)
    return datetime.datetime.strptime(cleaned, "%B %d, %Y").date().isoformat()


def openai_ids() -> tuple[list[str], dict[str, str], str]:
    import openai
    from openai.types.shared import chat_model, responses_model

    ids = literal_values(chat_model.ChatModel) + literal_values(responses_model.ResponsesModel)
    notes = inspect.getsource(chat_model)
    shutdown: dict[str, str] = {}
    for block in re.findall(r"- ((?:\"[^\"]+\",?\s*)+):\s+Announced\s+shutdown\s+date:\s+(\d{4}-\d{2}-\d{2})", notes):
        names, date = block
        for name in re.findall(r"\"([^\"]+)\"", names):
            shutdown[name] = date
    return list(dict.fromkeys(ids)), shutdown, openai.__version__


def family_of(model_id: str, families: dict[str, dict[str, Any]]) -> Optional[str]:
    """The family whose longest ``match`` prefix fits ``model_id``."""
    best, length = None, -1
    for name, family in families.items():
        for prefix in family.get("match", []):
            if (model_id == prefix or model_id.startswith(prefix)) and len(prefix) > length:
                best, length = name, len(prefix)
    return best


def excluded(model_id: str) -> Optional[str]:
    """Why an SDK-listed OpenAI id is left out (its longest matching prefix's reason), or None."""
    best = None
    for prefix, reason in hand.OPENAI_EXCLUDED_PREFIXES.items():
        if model_id.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, reason)
    return best[1] if best else None


# --------------------------------------------------------------------------- prices


PRICE_FIELDS = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write": "cache_write_mtok",
    "cache_write_1h": "cache_write_1h_mtok",
}


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    base = getattr(value, "base", value)  # tiered prices: the base tier (the tiers: _tiers)
    return float(Decimal(str(base)))


def _tiers(price: Any, cost: dict[str, float]) -> list[dict[str, Any]]:
    """genai-prices' per-field tiers as request-wide tiers: for each threshold (input tokens of
    the request), every rate in force above it (a field without a tier there keeps its own)."""
    starts = sorted(
        {int(t.start) for attr in PRICE_FIELDS.values() for t in getattr(getattr(price, attr, None), "tiers", [])}
    )
    tiers = []
    for start in starts:
        tier: dict[str, Any] = {"input_tokens_above": start}
        for name, attr in PRICE_FIELDS.items():
            value = getattr(price, attr, None)
            applicable = [t for t in getattr(value, "tiers", []) if int(t.start) <= start]
            tier[name] = float(Decimal(str(applicable[-1].price))) if applicable else cost[name]
        tiers.append(tier)
    return tiers


def prices_for(provider_id: str, model_id: str, today: datetime.date) -> tuple[dict[str, Any], Optional[int], str]:
    """``(cost, context_window, name)`` from genai-prices, else from ``PUBLISHED`` (the provider's
    own pages; also the window genai-prices lacks for a model it prices); zero prices when neither
    has the model. ``cost["tiers"]``: prices by input size."""
    from genai_prices import data

    provider = next(p for p in data.providers if p.id == provider_id)
    info = provider.find_model(model_id)
    published = hand.PUBLISHED.get(model_id, {})
    cost: dict[str, Any]
    if info is None:
        cost = {name: 0.0 for name in PRICE_FIELDS}
        cost.update(published.get("cost", {}))
        return cost, published.get("context_window"), ""
    price = info.prices
    if isinstance(price, list):  # conditional prices: the newest that has started, ignoring time-of-day discounts
        chosen = None
        for conditional in price:
            constraint = conditional.constraint
            start = getattr(constraint, "start_date", None)
            if constraint is None or (start is not None and start <= today):
                chosen = conditional.prices
        price = chosen if chosen is not None else price[0].prices
    cost = {name: _number(getattr(price, attr, None)) for name, attr in PRICE_FIELDS.items()}
    tiers = _tiers(price, cost)
    if tiers:
        cost["tiers"] = tiers
    return cost, info.context_window or published.get("context_window"), info.name or ""


# --------------------------------------------------------------------------- assembly


def model_row(
    provider: str,
    model_id: str,
    family_name: str,
    family: dict[str, Any],
    override: dict[str, Any],
    shutdown: Optional[str],
    today: datetime.date,
    aliases: list[str],
) -> dict[str, Any]:
    cost, context, name = prices_for(provider, model_id, today)
    override = dict(override)
    max_tokens = override.pop("max_tokens", family["max_tokens"])
    row: dict[str, Any] = {
        "id": model_id,
        "name": name or model_id,
        "family": family_name,
        "context_window": context or family.get("context_window", 200000),
        "max_tokens": max_tokens,
        "input": ["text", "image"],
        "cost": cost,
    }
    if override:
        row["capabilities"] = override
    if shutdown:
        row["shutdown"] = shutdown
        successor = hand.SUCCESSORS.get(model_id)
        if successor:
            row["successor"] = successor
    if aliases:
        row["aliases"] = sorted(aliases)
    return row


def retired_row(model_id: str, date: str) -> dict[str, str]:
    """The catalogue's ``retired`` entry of a model left out as shut down: ``get_model`` names
    its date and successor."""
    row = {"shutdown": date}
    if model_id in hand.SUCCESSORS:
        row["successor"] = hand.SUCCESSORS[model_id]
    return row


def sdk_models(
    provider: str,
    ids: list[str],
    shutdown: dict[str, str],
    families: dict[str, dict[str, Any]],
    today: datetime.date,
    retired: dict[str, dict[str, str]],
) -> list[dict[str, Any]]:
    """The rows of the SDK's current ids; the ones already shut down go to ``retired`` instead."""
    aliases: dict[str, list[str]] = {}
    bases: list[str] = []
    for model_id in ids:
        match = DATED.match(model_id)
        if match and match.group("base") in ids:
            aliases.setdefault(match.group("base"), []).append(model_id)
        else:
            bases.append(model_id)
    rows = []
    for model_id in bases:
        date = shutdown.get(model_id)
        if date and date <= today.isoformat():
            retired[model_id] = retired_row(model_id, date)
            continue  # already shut down
        if provider == "openai" and excluded(model_id):
            continue
        name = family_of(model_id, families)
        if name is None:
            raise InvalidValueError(
                f"{provider}:{model_id} belongs to no family: add it to scripts/catalogue_families.py"
            )
        family = families[name]
        override = family.get("overrides", {}).get(model_id, {})
        rows.append(model_row(provider, model_id, name, family, override, date, today, aliases.get(model_id, [])))
    return rows


def listed_models(
    provider: str, families: dict[str, dict[str, Any]], today: datetime.date, retired: dict[str, dict[str, str]]
) -> list[dict[str, Any]]:
    """The rows of the ids the families name; the ones already shut down go to ``retired`` instead."""
    rows = []
    for name, family in families.items():
        for model_id, override in family["models"].items():
            override = dict(override)
            shutdown = override.pop("shutdown", None)
            if shutdown and shutdown <= today.isoformat():
                retired[model_id] = retired_row(model_id, shutdown)
                continue  # already shut down, as for the SDK-listed models
            rows.append(model_row(provider, model_id, name, family, override, shutdown, today, []))
    return rows


def other_models() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for provider, rows in hand.OTHER_PROVIDERS.items():
        out[provider] = [
            {
                "id": model_id,
                "name": name,
                "context_window": context,
                "max_tokens": max_tokens,
                "input": ["text", "image"] if vision else ["text"],
                "cost": dict(zip(("input", "output", "cache_read", "cache_write"), prices)),
                "reasoning": reasoning,
            }
            for model_id, name, context, max_tokens, prices, reasoning, vision in rows
        ]
    return out


def family_table(families: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: {"doc": family["doc"], "capabilities": family["capabilities"]} for name, family in families.items()}


def build(today: datetime.date) -> dict[str, Any]:
    """The catalogue (``catalogue.json``'s content) from the rules and the installed sources.
    Raises ``ValueError`` for an SDK id no family matches."""
    retired: dict[str, dict[str, dict[str, str]]] = {p: {} for p in ("anthropic", "openai", "google", "deepseek")}
    a_ids, a_shutdown, a_version = anthropic_ids()
    o_ids, o_shutdown, o_version = openai_ids()
    import genai_prices

    catalogue = {
        "format": 1,
        "generated": today.isoformat(),
        "sources": {
            "ids": f"anthropic {a_version} (types.Model, DEPRECATED_MODELS); openai {o_version} (ChatModel, "
            "ResponsesModel); Gemini and DeepSeek ids from scripts/catalogue_families.py",
            "prices": f"genai-prices {getattr(genai_prices, '__version__', '')}".strip(),
            "capabilities": "scripts/catalogue_families.py (from the providers' docs, cited there)",
        },
        "families": {
            "anthropic": family_table(hand.ANTHROPIC),
            "openai": family_table(hand.OPENAI),
            "google": family_table(hand.GOOGLE),
            "deepseek": family_table(hand.DEEPSEEK),
        },
        "models": {
            "anthropic": sdk_models("anthropic", a_ids, a_shutdown, hand.ANTHROPIC, today, retired["anthropic"]),
            "openai": sdk_models("openai", o_ids, o_shutdown, hand.OPENAI, today, retired["openai"]),
            "google": listed_models("google", hand.GOOGLE, today, retired["google"]),
            "deepseek": listed_models("deepseek", hand.DEEPSEEK, today, retired["deepseek"]),
            **other_models(),
        },
    }
    catalogue["retired"] = {provider: rows for provider, rows in retired.items() if rows}
    return catalogue
