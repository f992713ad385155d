"""piagent in a minute, on the embedded model: no API key, no network.

    make demo                  (or: python examples/demo.py, with piagent[local] installed)

One agent, three runs, every event printed as it happens:

1. a streamed answer;
2. a tool call and its result: the call is forced with ``tool_choice`` (a 135M-parameter
   model only calls tools reliably when it must), then the model answers from the result;
3. a steering message sent from a second thread while the agent is answering: it is
   queued, and the agent takes it up as soon as the current turn ends.

The model is SmolLM2-135M-Instruct: tiny and fast on a CPU, and about as wise as its size.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, Optional

from piagent import Agent, tool
from piagent.ai.models import get_model
from piagent.types import TurnUpdate

WAIT = 300  # seconds: an upper bound for any run of this demo


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return f"{city}: sunny, 24 °C, light wind from the west."


class LivePrinter:
    """An agent listener: prints each event as it arrives (it runs on the agent's run thread)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_text = threading.Event()

    def stamp(self) -> str:
        return f"{time.monotonic() - self.started:5.1f}s"

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start" and event.message.role == "user":
            print(f"\n[{self.stamp()}] user      > {text_of(event.message)}")
        elif kind == "message_start" and event.message.role == "assistant":
            print(f"[{self.stamp()}] assistant < ", end="", flush=True)
        elif kind == "message_update" and event.assistant_message_event.type == "text_delta":
            self.first_text.set()
            print(event.assistant_message_event.delta, end="", flush=True)
        elif kind == "message_end" and event.message.role == "assistant":
            calls = event.message.tool_calls
            if calls:
                print(", ".join(f"(calls {c.name} {json.dumps(c.arguments)})" for c in calls), end="")
            print(f"   [{event.message.stop_reason}]")
        elif kind == "tool_execution_start":
            print(f"[{self.stamp()}] tool      > {event.tool_name}({json.dumps(event.args)})")
        elif kind == "tool_execution_end":
            text = "".join(block.text for block in event.result.content if block.type == "text")
            print(f"[{self.stamp()}] result    < {text}")


def text_of(message: Any) -> str:
    content = message.content
    return content if isinstance(content, str) else "".join(getattr(b, "text", "") for b in content)


def answer_freely_after_tools(context: Any, signal: Any) -> Optional[TurnUpdate]:
    """After a turn that ran tools, let the next turn answer in words (no forced call)."""
    return TurnUpdate(tool_choice="none") if context.tool_results else None


def main() -> int:
    model = get_model("local:smollm2-135m")
    model.max_tokens = 120  # a small model rambles; keep every answer short
    agent = Agent(
        model=model,
        system_prompt="You are a helpful assistant. Answer in one or two short sentences.",
        tools=[get_weather],
    )
    printer = LivePrinter()
    agent.subscribe(printer)

    print("== 1. A streamed answer")
    agent.prompt("What is the capital of France?")

    print("\n== 2. A tool call and its result")
    agent.tool_choice = {"name": "get_weather"}
    agent.prepare_next_turn = answer_freely_after_tools
    agent.prompt("What is the weather like in Paris today?")
    agent.tool_choice = None
    agent.prepare_next_turn = None

    print("\n== 3. Steering from a second thread while the agent answers")
    agent.reset()
    printer.first_text.clear()
    future = agent.prompt("Tell me a short story about a dragon.", wait=False)

    def steer_when_it_talks() -> None:
        if printer.first_text.wait(WAIT):
            agent.steer("Now give the dragon a name.")
            print(f" [{printer.stamp()}: thread {threading.current_thread().name!r} queued a steering message]", end="")

    steerer = threading.Thread(target=steer_when_it_talks, name="steerer")
    steerer.start()
    result = future.result(timeout=WAIT)
    steerer.join(WAIT)

    messages, tokens = len(agent.state.messages), result.usage.total_tokens
    print(f"\nDone: {messages} messages in the last run's transcript, {tokens} tokens.")
    return 0 if result.stop_reason in ("stop", "length") else 1


if __name__ == "__main__":
    sys.exit(main())
