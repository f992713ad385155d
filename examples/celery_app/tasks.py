"""A Celery app whose task runs a conversation's agent, driven from other processes (client.py).

    cd examples/celery_app
    redis-server &
    celery -A tasks worker --pool threads --concurrency 8

Each conversation (run id) is a session in one SQLite database, so a task continues where the
last one stopped, and a task delivered again after its worker died resumes from it.

Settings (environment): ``REDIS_URL`` (default redis://localhost:6379/0; the broker and result
backend use databases 1 and 2 of the same server), ``REPORTS_DIR`` (the folder the agent's tools
work on, default reports/ next to this file), ``SESSIONS_DB`` (default conversations.db next to
this file), ``PIAGENT_MODEL``
("provider:model-id"; default: a scripted demo model that needs no key and streams slowly
enough to steer and abort by hand).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery

from piagent import Agent, tool
from piagent.remote import Approval
from piagent.remote.celery_task import agent_task
from piagent.sessions import SqliteSession
from piagent.testing import faux_message, faux_text, faux_tool_call, register_faux_provider

REDIS_URL = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
HERE = Path(__file__).resolve().parent  # the defaults do not depend on where the worker starts
REPORTS = Path(os.environ.get("REPORTS_DIR") or HERE / "reports")
SESSIONS_DB = os.environ.get("SESSIONS_DB") or str(HERE / "conversations.db")


def _database(number: int) -> str:
    return REDIS_URL.rsplit("/", 1)[0] + f"/{number}"


app = Celery("celery_app", broker=_database(1), backend=_database(2))
app.conf.update(worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True)


@tool
def list_reports() -> list:
    """The report files in the reports folder."""
    return sorted(path.name for path in REPORTS.glob("*") if path.is_file())


@tool
def delete_report(name: str) -> str:
    """Delete one report file (a person must approve it first).

    Args:
        name: The file name, as list_reports gives it.
    """
    target = REPORTS / Path(name).name
    target.unlink()
    return f"deleted {target.name}"


def demo_model(context: Any, *_: Any) -> Any:
    """A scripted model: list the reports, delete the temporary ones, then answer.

    What it does next depends on the last message that is not a user message (steering may
    come between); its answer quotes the steering it received.
    """
    messages = context.messages
    done = [i for i, m in enumerate(messages) if m.role == "assistant" and m.stop_reason == "stop"]
    this_run = messages[done[-1] + 1 :] if done else messages
    steps = [m for m in this_run if m.role != "user"]
    if not steps:
        return faux_message([faux_text("Let me look at the reports folder."), faux_tool_call("list_reports", {})])
    last = steps[-1]
    if last.role == "toolResult" and last.tool_name == "list_reports":
        names = [n for n in (last.details or []) if n.endswith(".tmp")]
        if names:
            calls = [faux_tool_call("delete_report", {"name": n}) for n in names]
            return faux_message([faux_text(f"{len(names)} temporary files to remove."), *calls])
    steering = [m.content[0].text for m in this_run if m.role == "user"][1:]
    note = f" You said: {steering[-1]!r}." if steering else ""
    return faux_message("Done: the temporary reports are handled and the rest are kept." + note)


def build_agent(run_id: str) -> Agent:
    model: Any = os.environ.get("PIAGENT_MODEL")
    if model is None:
        faux = register_faux_provider(tokens_per_second=30.0)
        faux.set_responses([demo_model] * 50)
        model = faux.get_model()
    return Agent(
        model=model,
        system_prompt="You tidy up a reports folder. Delete only temporary files (*.tmp).",
        tools=[list_reports, delete_report],
        max_turns=20,
        session=SqliteSession(SESSIONS_DB, run_id),
    )


run_conversation = agent_task(app, build_agent, REDIS_URL, approval=Approval(tools={"delete_report"}, timeout=600.0))
