"""A catalogue newer than the release, built on the user's machine (docs/models.md#refreshing-the-catalogue):
``piagent --refresh-models`` / ``refresh_catalogue()`` build it with the package's code and
per-family rules from the SDKs and genai-prices installed, into ``$PIAGENT_HOME/catalogue.json``;
each new process uses it when it is newer than the built-in one, says so in ``--list-models``,
and keeps the package's family rules. Every process here gets a temporary ``PIAGENT_HOME``."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from piagent.ai import _catalogue_build as builder
from piagent.ai.models import CATALOGUE_FILE

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = json.loads(CATALOGUE_FILE.read_text())
GENERATED = datetime.date.fromisoformat(BUILT_IN["generated"])


def piagent(home: Path, *argv: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """``python -m piagent argv`` (or ``python -c code``) with ``PIAGENT_HOME=home``."""
    env = dict(os.environ, PIAGENT_HOME=str(home))
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "piagent", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def user_catalogue(home: Path, generated: datetime.date, **changes: Any) -> dict[str, Any]:
    """A user-level catalogue like the built-in one, dated ``generated``, with one model more."""
    data = json.loads(CATALOGUE_FILE.read_text())
    extra = dict(data["models"]["anthropic"][0], id="claude-opus-9", name="Claude Opus 9")
    data["models"]["anthropic"].insert(0, extra)
    data.update(generated=generated.isoformat(), **changes)
    home.mkdir(parents=True, exist_ok=True)
    (home / "catalogue.json").write_text(json.dumps(data))
    return data


def sources_installed() -> None:
    for module in ("anthropic", "openai", "genai_prices"):
        pytest.importorskip(module)


def test_the_package_carries_the_rules_of_scripts_catalogue_families():
    sys.path.insert(0, str(ROOT / "scripts"))
    import catalogue_families as hand

    rules = {name: value for name, value in vars(hand).items() if name.isupper()}
    assert json.loads(json.dumps(rules)) == json.loads(builder.RULES_FILE.read_text()), (
        "run `python scripts/generate_catalogue.py --rules`"
    )


def test_the_package_builds_the_built_in_catalogue_from_the_sources_it_was_generated_from():
    """The test extra pins the SDKs and genai-prices of the built-in catalogue: the package's
    builder (what --refresh-models runs) gives exactly the built-in file."""
    sources_installed()
    assert builder.build(GENERATED) == BUILT_IN


def test_refresh_models_writes_the_user_catalogue_and_the_next_process_uses_it(tmp_path):
    sources_installed()
    home = tmp_path / "home"
    later = GENERATED + datetime.timedelta(days=1)
    refresh = (
        "import datetime, json; from piagent.ai import refresh_catalogue, catalogue_in_use\n"
        f"path = refresh_catalogue(datetime.date.fromisoformat({later.isoformat()!r}))\n"
        "print(json.dumps({'path': str(path), **{k: str(v) for k, v in catalogue_in_use().items()}}))"
    )
    done = piagent(home, code=refresh)
    assert done.returncode == 0, done.stderr
    used = json.loads(done.stdout)
    assert used == {"path": str(home / "catalogue.json"), "source": "user", "generated": later.isoformat()}
    written = json.loads((home / "catalogue.json").read_text())
    assert written["models"]["openai"] == [
        row for row in BUILT_IN["models"]["openai"] if row.get("shutdown", "9999") > later.isoformat()
    ]

    listed = piagent(home, "--list-models")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == f"# catalogue: user ({home / 'catalogue.json'}), generated {later}"


def test_the_command_refreshes_into_the_user_directory_and_says_which_catalogue_is_in_use(tmp_path):
    sources_installed()
    home = tmp_path / "home"
    done = piagent(home, "--refresh-models")
    assert done.returncode == 0, done.stderr
    today = datetime.date.today().isoformat()
    newer = today > BUILT_IN["generated"]
    where = f"user ({home / 'catalogue.json'}), generated {today}" if newer else "built-in"
    assert done.stdout.startswith(f"wrote {home / 'catalogue.json'}\n# catalogue: {where}")
    assert json.loads((home / "catalogue.json").read_text())["generated"] == today


def test_a_user_directory_that_cannot_be_written_is_a_clear_error(tmp_path):
    sources_installed()
    home = tmp_path / "home"
    home.write_text("a file where the directory should be")
    done = piagent(home, "--refresh-models")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"piagent: could not write the catalogue into {home}: ")
    assert "Traceback" not in done.stderr


def test_a_newer_user_catalogue_is_used_with_the_packages_family_rules(tmp_path):
    home = tmp_path / "home"
    families = json.loads(json.dumps(BUILT_IN["families"]))
    families["anthropic"]["claude-adaptive"]["capabilities"]["thinking"] = "none"  # a stale rule
    user_catalogue(home, GENERATED + datetime.timedelta(days=3), families=families)
    code = "from piagent.ai import get_model; m = get_model('anthropic:claude-opus-9'); print(m.capabilities.thinking)"
    shown = piagent(home, code=code)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == BUILT_IN["families"]["anthropic"]["claude-adaptive"]["capabilities"]["thinking"]
    listed = piagent(home, "--list-models").stdout.splitlines()
    assert listed[0].startswith("# catalogue: user (") and any(
        line.startswith("anthropic:claude-opus-9 ") for line in listed
    )


def test_a_model_declared_by_hand_first_gets_its_capabilities_from_the_user_catalogue(tmp_path):
    """custom_model() of an id only the refreshed catalogue knows, before any other look-up."""
    home = tmp_path / "home"
    data = user_catalogue(home, GENERATED + datetime.timedelta(days=1))
    code = "from piagent.ai import custom_model\n"
    code += "m = custom_model('claude-opus-9', 'http://127.0.0.1:9', api='anthropic-messages', register=False)\n"
    code += "print(m.capabilities.thinking if m.capabilities else None)"
    shown = piagent(home, code=code)
    assert shown.returncode == 0, shown.stderr
    family = data["models"]["anthropic"][0]["family"]
    assert shown.stdout.strip() == BUILT_IN["families"]["anthropic"][family]["capabilities"]["thinking"]


def test_a_catalogue_loaded_by_hand_stays_when_the_user_catalogue_comes_into_use(tmp_path):
    """load_catalogue() before the first look-up: the user-level catalogue, applied at that
    look-up, must not replace what the program loaded itself."""
    home = tmp_path / "home"
    user_catalogue(home, GENERATED + datetime.timedelta(days=2))
    own = json.loads(CATALOGUE_FILE.read_text())
    own["models"]["anthropic"] = [dict(own["models"]["anthropic"][0], id="claude-own-1", name="Own")]
    (tmp_path / "own.json").write_text(json.dumps(own))
    code = (
        "from piagent.ai import catalogue_in_use, get_model, load_catalogue\n"
        f"load_catalogue({str(tmp_path / 'own.json')!r})\n"
        "print(get_model('anthropic:claude-own-1').id, get_model('anthropic:claude-opus-9').id)\n"
        "print(catalogue_in_use()['source'])"
    )
    shown = piagent(home, code=code)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["claude-own-1 claude-opus-9", "user"]


def test_a_user_catalogue_no_newer_than_the_built_in_one_is_not_used(tmp_path):
    home = tmp_path / "home"
    user_catalogue(home, GENERATED)
    listed = piagent(home, "--list-models").stdout.splitlines()
    assert listed[0] == (
        f"# catalogue: built-in ({CATALOGUE_FILE}), generated {GENERATED}; "
        "piagent --refresh-models rebuilds it from the SDKs installed here"
    )
    assert not any(line.startswith("anthropic:claude-opus-9 ") for line in listed)


def test_an_unusable_user_catalogue_leaves_the_built_in_one_with_a_warning(tmp_path):
    home = tmp_path / "home"
    data = user_catalogue(home, GENERATED + datetime.timedelta(days=1))
    data["models"]["anthropic"][0]["family"] = "no-such-family"
    (home / "catalogue.json").write_text(json.dumps(data))
    code = "import logging; logging.basicConfig()\nfrom piagent.ai import catalogue_in_use, get_models\n"
    code += "print(catalogue_in_use()['source'])\n"
    code += "print(' '.join(m.id for m in get_models('anthropic')))"
    shown = piagent(home, code=code)
    source, ids = shown.stdout.splitlines()
    assert source == "built-in" and "claude-opus-9" not in ids.split() and "claude-opus-4-8" in ids.split()
    assert "is not usable" in shown.stderr and "no-such-family" in shown.stderr


@pytest.mark.parametrize(
    "body",
    [
        {"models": {"openai": [1]}},
        {"models": [1]},
        {"models": {"openai": [{"id": "x", "cost": 3}]}},
        {"models": {}},
        {"generated": 99991231},
        {"generated": "later"},
        {"models": {"openai": [{"id": "x"}]}, "retired": [1]},
        {"models": {"openai": [{"id": "x"}]}, "retired": {"google": {"gemini-x": "2026-01-01"}}},
    ],
)
def test_a_malformed_user_catalogue_is_a_warning_and_the_built_in_one_stays(tmp_path, body):
    home = tmp_path / "home"
    home.mkdir()
    (home / "catalogue.json").write_text(json.dumps({"format": 1, "generated": "9999-12-31", **body}))
    listed = piagent(home, "--list-models")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"# catalogue: built-in ({CATALOGUE_FILE})")
    assert any(line.startswith("anthropic:") for line in listed.stdout.splitlines())
    assert f"piagent: {home / 'catalogue.json'} is not usable (" in listed.stderr


def test_without_the_sources_it_names_them_and_the_command_that_installs_them(tmp_path):
    home = tmp_path / "home"
    missing = ("anthropic", "openai", "genai_prices")
    blocked = f"import sys\nfor name in {missing!r}:\n    sys.modules[name] = None  # not installed\n"
    done = piagent(home, code=blocked + "from piagent.cli import main\nraise SystemExit(main(['--refresh-models']))")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"piagent: refreshing the catalogue needs anthropic, openai, genai-prices: pip install -e '{ROOT}[catalogue]'"
    )
    assert not home.exists()


def test_an_sdk_id_no_family_matches_stops_the_refresh_naming_it(monkeypatch):
    sources_installed()
    rules = vars(builder.hand).copy()
    rules["OPENAI"] = {name: family for name, family in rules["OPENAI"].items() if name != "gpt-4"}
    monkeypatch.setattr(builder, "hand", type(builder.hand)(**rules))
    with pytest.raises(ValueError, match=r"openai:gpt-4\.1 belongs to no family: add it to scripts/catalogue_families"):
        builder.build(GENERATED)


@pytest.mark.parametrize("name", ["catalogue.json", "learned-rules.json"])
def test_a_user_level_file_that_is_a_fifo_is_a_warning_never_a_wait(tmp_path, name):
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / name)  # no writer: reading it would block for good
    code = "import logging; logging.basicConfig()\nimport piagent.ai as ai\nai.remember_rejections()\n"
    code += "print(ai.catalogue_in_use()['source'])"
    shown = piagent(home, code=code)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "built-in"
    assert "a FIFO, not a regular file" in shown.stderr


def test_a_user_catalogue_nested_too_deeply_is_a_warning_naming_the_bound(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "catalogue.json").write_text('{"models": ' + "[" * 5000 + "]" * 5000 + "}")
    code = "import logging; logging.basicConfig()\nimport piagent.ai as ai\nai.get_models('openai')"
    shown = piagent(home, code=code)
    assert shown.returncode == 0, shown.stderr
    assert "nested deeper than 200 levels" in shown.stderr and "Traceback" not in shown.stderr


def test_a_refresh_no_newer_than_the_built_in_catalogue_says_the_built_in_one_stays(tmp_path):
    sources_installed()
    home = tmp_path / "home"
    on_its_day = (  # the command run on the day the built-in catalogue was generated
        "import datetime\nimport piagent.ai.models as models\nfrom piagent.cli import main\n"
        "class Day(datetime.date):\n"
        f"    @classmethod\n    def today(cls):\n        return cls.fromisoformat('{GENERATED}')\n"
        "models.datetime = type('datetime', (), {'date': Day})\n"
        "raise SystemExit(main(['--refresh-models']))"
    )
    done = piagent(home, code=on_its_day)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"wrote {home / 'catalogue.json'} (generated {GENERATED}): it is not newer than the built-in "
        f"catalogue (generated {GENERATED}), so the built-in one stays in use ("
    )
    assert "--refresh-models rebuilds it" not in done.stdout
