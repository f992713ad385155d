"""``python manage.py ask_agent "question"``: an agent answers from the catalogue.

The tool is declared ``@tool(on_run_thread=True)``, so it runs on this command's own thread:
it uses the command's database connection and sees whatever the caller's transaction sees,
uncommitted rows included. The first turn is forced to search the catalogue
(``tool_choice``), so even the small embedded model answers from the database.

``--conversation ID`` keeps the exchange in the database (``catalog.sessions``): the next
``ask_agent --conversation ID`` continues it.
"""

import os
from typing import Any, Optional

from django.core.management.base import BaseCommand, CommandError

from piagent import Agent, PiAgentError
from piagent.types import TurnUpdate

from ...sessions import conversation_session
from ...tools import search_books

SYSTEM_PROMPT = "You are the assistant of a small bookshop. Answer briefly, from the catalogue only."


def answer_after_searching(context: Any, signal: Any) -> Optional[TurnUpdate]:
    return TurnUpdate(tool_choice="none") if context.tool_results else None


class Command(BaseCommand):
    help = "Ask an agent about the books in the catalogue."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("question")
        parser.add_argument("--model", help="provider:model-id (default: $PIAGENT_MODEL or local:smollm2-135m)")
        parser.add_argument("--conversation", help="keep the exchange in this conversation, continuing it")

    def handle(self, *args: Any, **options: Any) -> None:
        try:  # an unknown model or a bad option: said like any other command error
            agent = Agent(
                model=options["model"] or os.environ.get("PIAGENT_MODEL") or "local:smollm2-135m",
                system_prompt=SYSTEM_PROMPT,
                tools=[search_books],
                tool_choice={"name": "search_books"},
                prepare_next_turn=answer_after_searching,
                max_turns=4,
                session=conversation_session(options["conversation"]) if options["conversation"] else None,
            )
        except PiAgentError as exc:
            raise CommandError(str(exc)) from exc
        agent.subscribe(self.show)
        result = agent.prompt(options["question"])
        if result.stop_reason in ("error", "aborted"):
            raise CommandError(result.error_message or result.stop_reason)
        self.stdout.write(result.text)

    def show(self, event: Any) -> None:
        if event.type == "tool_execution_start":
            self.stderr.write(f"searching the catalogue: {event.args}")
        elif event.type == "tool_execution_end":
            found = "".join(block.text for block in event.result.content if block.type == "text")
            self.stderr.write(f"found:\n{found}")
