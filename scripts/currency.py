"""``make currency``: piagent's catalogue and request shapes against the newest SDKs and prices.

``make test`` pins the SDKs and genai-prices the catalogue was generated from, so it gives the
same answer every day. This report (run by ``make currency`` in its own environment,
``.venv-currency``, with the newest releases installed) says what has moved since, as one table:

* ``missing id``: a current model an SDK lists that the catalogue lacks (and the family it
  would join, or that none matches);
* ``past shutdown`` / ``shutdown announced``: a catalogue model shut down by today, or one the
  SDK now gives a shutdown date the catalogue lacks;
* ``price`` / ``window``: genai-prices' figures that differ from the catalogue's;
* ``request shape``: an SDK-oracle test of ``tests/ai/providers`` (piagent's request beside
  the SDK's) that fails under the newest SDKs, with its message.

It exits 0 when it could compare (differences are the report, not a failure), 1 when it could
not run. ``make catalogue`` then regenerates the catalogue; docs/models.md#currency.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piagent.ai import _catalogue_build as builder  # noqa: E402 (the checkout is put on the path first)

CATALOGUE = ROOT / "piagent" / "ai" / "catalogue.json"
#: The SDK-oracle tests: each compares piagent's request with the one the official SDK builds.
ORACLE_TESTS = tuple(
    f"tests/ai/providers/test_{name}_models.py" for name in ("anthropic", "openai", "google", "deepseek")
)
SOURCES = ("anthropic", "openai", "google-genai", "genai-prices")
CELL = 110  # characters of one table cell
Row = tuple[str, str, str, str]  # check, subject, catalogue, newest


def installed(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


# --------------------------------------------------------------------------- the catalogue


def _known_ids(catalogue: Mapping[str, Any], provider: str) -> set[str]:
    rows = catalogue["models"].get(provider, [])
    return {row["id"] for row in rows} | {alias for row in rows for alias in row.get("aliases", [])}


def missing_ids(
    catalogue: Mapping[str, Any], provider: str, ids: Iterable[str], shutdown: Mapping[str, str], today: datetime.date
) -> list[Row]:
    """The SDK's current ids the catalogue lacks (dated aliases of a known id are not missing)."""
    known = _known_ids(catalogue, provider)
    families = builder.hand.ANTHROPIC if provider == "anthropic" else builder.hand.OPENAI
    rows = []
    for model_id in ids:
        match = builder.DATED.match(model_id)
        if model_id in known or (match and match.group("base") in known):
            continue
        if shutdown.get(model_id, "9999") <= today.isoformat():
            continue
        if provider == "openai" and builder.excluded(model_id):
            continue
        family = builder.family_of(model_id, families)
        newest = f"listed; family {family}" if family else "listed; no family matches: add one"
        rows.append(("missing id", f"{provider}:{model_id}", "absent", newest))
    return rows


def shutdowns(
    catalogue: Mapping[str, Any], provider: str, shutdown: Mapping[str, str], today: datetime.date
) -> list[Row]:
    """Catalogue models shut down by today, and shutdown dates the SDK announces that it lacks."""
    rows = []
    for row in catalogue["models"].get(provider, []):
        ref, ours, theirs = f"{provider}:{row['id']}", row.get("shutdown"), shutdown.get(row["id"])
        date = ours or theirs
        if date and date <= today.isoformat():
            rows.append(("past shutdown", ref, ours or "no date", f"shut down {date}"))
        elif theirs and theirs != ours:
            rows.append(("shutdown announced", ref, ours or "no date", theirs))
    return rows


def _figures(cost: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{key} {json.dumps(value) if isinstance(value, list) else format(value, 'g')}" for key, value in cost.items()
    )


def price_differences(catalogue: Mapping[str, Any], today: datetime.date) -> list[Row]:
    """genai-prices' prices and windows that differ from the catalogue's (models it knows)."""
    rows: list[Row] = []
    for provider in ("anthropic", "openai", "google", "deepseek"):
        for row in catalogue["models"].get(provider, []):
            cost, window, _ = builder.prices_for(provider, row["id"], today)
            if window is None and not any(v for k, v in cost.items() if k != "tiers"):
                continue  # genai-prices does not know it
            ours = row.get("cost", {})
            changed = sorted(k for k in set(cost) | set(ours) if cost.get(k, 0) != ours.get(k, 0))
            ref = f"{provider}:{row['id']}"
            if changed:
                rows.append(
                    (
                        "price",
                        ref,
                        _figures({k: ours.get(k, 0) for k in changed}),
                        _figures({k: cost.get(k, 0) for k in changed}),
                    )
                )
            if window and window != row.get("context_window"):
                rows.append(("window", ref, str(row.get("context_window")), str(window)))
    return rows


def catalogue_rows(catalogue: Mapping[str, Any], today: datetime.date) -> list[Row]:
    """Every difference between ``catalogue`` and the SDKs and genai-prices installed here."""
    rows: list[Row] = []
    for provider, source in (("anthropic", builder.anthropic_ids), ("openai", builder.openai_ids)):
        ids, shutdown, _ = source()
        rows += missing_ids(catalogue, provider, ids, shutdown, today)
        rows += shutdowns(catalogue, provider, shutdown, today)
    for provider in ("google", "deepseek"):
        rows += shutdowns(catalogue, provider, {}, today)
    return rows + price_differences(catalogue, today)


# --------------------------------------------------------------------------- request shapes


def request_shape_rows(tests: Iterable[str] = ORACLE_TESTS) -> list[Row]:
    """The SDK-oracle tests that fail here, each with the first line of its message."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *tests]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if not report.exists():
            return [("request shape", "the oracle tests", "", f"could not run: {done.stderr.strip()[-CELL:]}")]
        rows: list[Row] = []
        for case in ElementTree.parse(report).iter("testcase"):
            for problem in list(case.findall("failure")) + list(case.findall("error")):
                message = (problem.get("message") or problem.text or "").strip().splitlines()
                name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
                rows.append(("request shape", name, "same as the pinned SDK", message[0] if message else problem.tag))
        return rows


# --------------------------------------------------------------------------- the table


def _cut(text: str) -> str:
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


def table(rows: list[Row]) -> str:
    header: Row = ("check", "subject", "catalogue / pinned", "newest")
    cells = [header] + [tuple(_cut(c) for c in row) for row in rows]  # type: ignore[misc]
    widths = [max(len(row[i]) for row in cells) for i in range(4)]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    today = datetime.date.fromisoformat(args[0]) if args else datetime.date.today()
    catalogue = json.loads(CATALOGUE.read_text(encoding="utf-8"))
    missing = builder.missing_sources()
    if missing:
        print(f"currency: cannot compare without {', '.join(missing)} (make currency installs them)")
        return 1
    sources = catalogue["sources"]
    print(f"currency on {today}: the catalogue of {catalogue['generated']} ({sources['ids']}; {sources['prices']})")
    print("newest here: " + ", ".join(f"{name} {installed(name)}" for name in SOURCES))
    rows = catalogue_rows(catalogue, today) + request_shape_rows()
    print(table(rows) if rows else "no differences")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
