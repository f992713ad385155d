"""``make currency``'s report (scripts/currency.py), on the SDKs and genai-prices the test extra
pins: the catalogue generated from them shows no difference on its generation day, and each
kind of difference shows as one row naming the model and both sides."""

from __future__ import annotations

import copy
import datetime
import json
import sys
from pathlib import Path

import pytest

from piagent.ai.models import CATALOGUE_FILE

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import currency  # noqa: E402 (scripts/ is put on the path first)

CATALOGUE = json.loads(CATALOGUE_FILE.read_text())
GENERATED = datetime.date.fromisoformat(CATALOGUE["generated"])


@pytest.fixture(autouse=True)
def _sources() -> None:
    for module in ("anthropic", "openai", "genai_prices"):
        pytest.importorskip(module)


def test_the_catalogue_and_the_sources_it_was_generated_from_show_no_difference():
    assert currency.catalogue_rows(CATALOGUE, GENERATED) == []


def test_each_kind_of_difference_is_one_row_with_both_sides():
    stale = copy.deepcopy(CATALOGUE)
    anthropic = stale["models"]["anthropic"]
    dropped = anthropic.pop(0)
    anthropic[0]["cost"] = dict(anthropic[0]["cost"], input=123.0)
    anthropic[0]["context_window"] = 7
    openai = {row["id"]: row for row in stale["models"]["openai"]}
    dated = next(row for row in openai.values() if row.get("shutdown"))
    dated.pop("shutdown")
    rows = currency.catalogue_rows(stale, GENERATED)
    ref = f"anthropic:{anthropic[0]['id']}"
    assert ("missing id", f"anthropic:{dropped['id']}", "absent", f"listed; family {dropped['family']}") in rows
    assert ("price", ref, "input 123", f"input {CATALOGUE['models']['anthropic'][1]['cost']['input']:g}") in rows
    assert ("window", ref, "7", str(CATALOGUE["models"]["anthropic"][1]["context_window"])) in rows
    assert ("shutdown announced", f"openai:{dated['id']}", "no date", CATALOGUE_SHUTDOWNS[dated["id"]]) in rows
    assert len(rows) == 4


CATALOGUE_SHUTDOWNS = {row["id"]: row.get("shutdown") for row in CATALOGUE["models"]["openai"]}


def test_a_model_past_its_shutdown_day_is_reported():
    dated = {
        f"{p}:{row['id']}": row["shutdown"]
        for p, rows in CATALOGUE["models"].items()
        for row in rows
        if row.get("shutdown")
    }
    later = datetime.date.fromisoformat(max(dated.values())) + datetime.timedelta(days=1)
    rows = [row for row in currency.catalogue_rows(CATALOGUE, later) if row[0] == "past shutdown"]
    assert sorted(row[1] for row in rows) == sorted(dated)
    assert all(row[2] == dated[row[1]] and row[3] == f"shut down {dated[row[1]]}" for row in rows)


def test_a_failing_oracle_test_is_a_request_shape_row_with_its_message(tmp_path):
    oracle = tmp_path / "test_oracle.py"
    oracle.write_text(
        "def test_same_body():\n    assert {'effort': 'none'} == {'effort': 'low'}, 'the SDK sends effort low'\n\n"
        "def test_fine():\n    pass\n"
    )
    [row] = currency.request_shape_rows([str(oracle)])
    assert row[:3] == ("request shape", "test_oracle::test_same_body", "same as the pinned SDK")
    assert row[3].startswith("AssertionError: the SDK sends effort low")


def test_the_table_lines_up_its_columns():
    lines = currency.table([("price", "openai:gpt-x", "input 1", "input 2")]).splitlines()
    assert lines[0].startswith("| check ") and set(lines[1]) <= {"|", "-"}
    assert len({len(line) for line in lines}) == 1
