"""examples/django_project under a real Django: ``ask_agent`` inside the caller's transaction.

The database is a temporary SQLite file, so another thread's connection really is another
connection: only a tool run on the caller's own thread can see its uncommitted rows.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from piagent.testing import faux_message, faux_tool_call, register_faux_provider

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django_project"
WAIT = 10


@pytest.fixture(scope="module")
def django_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import django
    from django.core.management import call_command

    os.environ["DJANGO_SETTINGS_MODULE"] = "bookshop.settings"
    os.environ["BOOKSHOP_DB"] = str(tmp_path_factory.mktemp("bookshop") / "db.sqlite3")
    sys.path.insert(0, str(PROJECT))
    try:
        django.setup()
        call_command("migrate", verbosity=0)
        yield
    finally:
        sys.path.remove(str(PROJECT))


def answer_with_the_tool_result(context: Any, options: Any, state: Any, model: Any) -> Any:
    """The scripted model's second turn: repeat what the tool returned."""
    return faux_message("In the catalogue: " + context.messages[-1].content[0].text)


@pytest.fixture
def faux() -> Iterator[Any]:
    provider = register_faux_provider()
    provider.set_responses(
        [
            faux_message([faux_tool_call("search_books", {"query": "Tolkien"})]),
            answer_with_the_tool_result,
        ]
    )
    yield provider
    provider.unregister()


def test_ask_agent_tool_sees_the_callers_uncommitted_row(django_project: None, faux: Any) -> None:
    from catalog.models import Book
    from django.core.management import call_command
    from django.db import transaction

    out, err = io.StringIO(), io.StringIO()
    with transaction.atomic():
        Book.objects.create(title="The Hobbit", author="J. R. R. Tolkien", year=1937)
        call_command("ask_agent", "Which books by Tolkien do we have?", model=faux.get_model(), stdout=out, stderr=err)
        transaction.set_rollback(True)  # the row is never committed
    assert "In the catalogue: The Hobbit by J. R. R. Tolkien (1937)" in out.getvalue()
    assert "searching the catalogue: {'query': 'Tolkien'}" in err.getvalue()
    assert not Book.objects.filter(author__contains="Tolkien").exists()
    assert faux.state.requests[0].options.tool_choice == {"name": "search_books"}
    assert faux.state.requests[1].options.tool_choice == "none"


def test_another_thread_does_not_see_the_uncommitted_row(django_project: None) -> None:
    """Why the command runs its tool sequentially: a pool thread has its own connection."""
    from catalog.models import Book
    from catalog.tools import search_books
    from django.db import connection, transaction

    seen: list[str] = []

    def search_in_another_thread() -> None:
        try:
            seen.append(search_books.function("Tolkien"))
        finally:
            connection.close()  # this thread's own connection

    with transaction.atomic():
        Book.objects.create(title="The Hobbit", author="J. R. R. Tolkien", year=1937)
        assert "The Hobbit" in search_books.function("Tolkien")  # this thread sees it
        thread = threading.Thread(target=search_in_another_thread)
        thread.start()
        thread.join(WAIT)
        transaction.set_rollback(True)
    assert seen == ["No book matches 'Tolkien'."]


def test_ask_agent_reports_a_model_error_as_a_command_error(django_project: None) -> None:
    from django.core.management import CommandError, call_command

    provider = register_faux_provider()
    provider.set_responses([faux_message("", stop_reason="error", error_message="HTTP 503: overloaded")])
    try:
        with pytest.raises(CommandError, match="HTTP 503: overloaded"):
            call_command("ask_agent", "Anything?", model=provider.get_model(), stdout=io.StringIO())
    finally:
        provider.unregister()


def test_a_conversation_is_kept_in_two_models_and_the_next_command_continues_it(django_project: None) -> None:
    """The session store of catalog/sessions.py: one row per conversation, one per entry."""
    from catalog.models import Conversation
    from catalog.sessions import conversation_session
    from django.core.management import call_command

    provider = register_faux_provider()
    provider.set_responses(
        [
            faux_message([faux_tool_call("search_books", {"query": "Le Guin"})]),
            answer_with_the_tool_result,
            faux_message([faux_tool_call("search_books", {"query": "Earthsea"})]),
            answer_with_the_tool_result,
        ]
    )
    try:  # the seeded catalogue has A Wizard of Earthsea
        for question in ("Anything by Le Guin?", "When was Earthsea written?"):
            call_command(
                "ask_agent", question, conversation="reader-7", model=provider.get_model(), stdout=io.StringIO()
            )
    finally:
        provider.unregister()
    second_call = provider.state.requests[2].context.messages
    assert [m.role for m in second_call] == ["user", "assistant", "toolResult", "assistant", "user"]
    assert second_call[0].content[0].text == "Anything by Le Guin?"
    conversation = Conversation.objects.get(pk="reader-7")
    # model_change, the system prompt (a custom entry), 8 messages and each tool call's intent (docs/effects.md)
    assert conversation.header["id"] == "reader-7" and conversation.entries.count() == 12
    positions = list(conversation.entries.order_by("position").values_list("position", flat=True))
    assert positions == list(range(1, 13))
    session = conversation_session("reader-7")
    assert [m.role for m in session.messages()][-2:] == ["toolResult", "assistant"]
    assert session.messages()[-1].text.startswith("In the catalogue: A Wizard of Earthsea")


def test_migrate_seeds_the_catalogue_so_the_command_has_books_to_find(django_project: None) -> None:
    from catalog.models import Book
    from catalog.tools import search_books

    assert Book.objects.count() == 6
    assert search_books.function("Le Guin") == (
        "A Wizard of Earthsea by Ursula K. Le Guin (1968)\nThe Left Hand of Darkness by Ursula K. Le Guin (1969)"
    )


def test_ask_agent_with_an_unknown_model_is_a_clean_command_error_not_a_traceback(tmp_path: Path) -> None:
    env = dict(os.environ, BOOKSHOP_DB=str(tmp_path / "db.sqlite3"))
    env.pop("PIAGENT_MODEL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "ask_agent", "--model", "nowhere:thing", "Anything by Le Guin?"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("CommandError: Unknown provider 'nowhere'. Known providers: ")
