"""The agents the remote tests run in their workers, one scripted faux model per scenario.

A run id names its scenario (``"steer-..."``, ``"abort-..."``, ...). Every agent gets its own faux
provider, so concurrent runs in one worker never share a script.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from piagent import Agent, tool
from piagent.abort import AbortSignal
from piagent.ai.types import AssistantMessage
from piagent.remote import Approval
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

STEERS_PER_PRODUCER = 100
PRODUCERS = 4
SLOW_TOOL_SECONDS = 30.0  # what an aborted tool would otherwise take
APPROVAL = Approval(tools={"delete"}, timeout=2.0)
MAX_TURNS = 5000  # a bound on every scripted run


def _user_texts(context: Any) -> list[str]:
    return [m.content[0].text for m in context.messages if m.role == "user"]


def _tool_results(context: Any) -> int:
    return sum(1 for m in context.messages if m.role == "toolResult")


@tool
def pause(signal: AbortSignal) -> str:
    """Wait a moment for news."""
    signal.wait(0.005)
    return "nothing new"


@tool
def slow(signal: AbortSignal) -> str:
    """A long job that stops when the run is aborted."""
    if signal.wait(SLOW_TOOL_SECONDS):
        return "stopped"
    return "finished"


@tool
def delete(name: str) -> str:
    """Delete something (needs approval)."""
    return f"deleted {name}"


def steer_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    steered = [text for text in _user_texts(context) if text.startswith("p")]
    if len(steered) < PRODUCERS * STEERS_PER_PRODUCER:
        return faux_message([faux_tool_call("pause", {})])
    return faux_message(f"received {len(steered)}")


def abort_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    if not any(m.role == "assistant" for m in context.messages):  # the first answer only
        return faux_message([faux_tool_call("slow", {})])
    return faux_message("after slow")


def approve_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    if _tool_results(context) == 0:
        calls = [faux_tool_call("delete", {"name": name}, id=f"call_{name}") for name in ("a", "b", "c")]
        return faux_message(calls)
    return faux_message("done")


def answer_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    return faux_message(f"answer to {_user_texts(context)[-1]}")


@tool
def work(index: int, signal: AbortSignal) -> str:
    """One job of a batch; the first attempt runs until the worker is killed (30 s at most)."""
    marker = Path(os.environ["PIAGENT_TEST_SESSIONS"]) / f"work-{index}.started"
    if not marker.exists():
        marker.write_text("started")
        signal.wait(SLOW_TOOL_SECONDS)
    return f"done {index}"


def crash_tools_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    if not any(m.role == "assistant" for m in context.messages):
        return faux_message([faux_tool_call("work", {"index": i}, id=f"call_{i}") for i in range(3)])
    return faux_message(f"finished, having read {len(_user_texts(context))} user messages")


def crash_stream_script(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
    return faux_message("a slow answer " + "word " * 60 + f"after {len(_user_texts(context))} user messages")


SCRIPTS = {
    "steer": (steer_script, [pause], None),
    "abort": (abort_script, [slow], None),
    "approve": (approve_script, [delete], None),
    "answer": (answer_script, [], 400.0),
    "crashtools": (crash_tools_script, [work], None),
    "crashstream": (crash_stream_script, [], 40.0),
    "killack": (answer_script, [], None),
}


def session_path(run_id: str) -> Optional[Path]:
    """Where the run's session is kept, when the test gives a folder (``PIAGENT_TEST_SESSIONS``)."""
    folder = os.environ.get("PIAGENT_TEST_SESSIONS")
    return Path(folder) / f"{run_id}.jsonl" if folder else None


def build_agent(run_id: str) -> Agent:
    script, tools, tokens_per_second = SCRIPTS[run_id.split("-")[0]]
    faux = register_faux_provider(tokens_per_second=tokens_per_second, chunk_tokens=(1, 2))
    faux.set_responses([script] * MAX_TURNS)
    path = session_path(run_id)
    if path is None:
        return Agent(model=faux.get_model(), tools=tools, max_turns=MAX_TURNS)
    from piagent.sessions import JsonlSession

    return Agent(model=faux.get_model(), tools=tools, max_turns=MAX_TURNS, session=JsonlSession(path))


def redis_url() -> str:
    return os.environ["PIAGENT_TEST_REDIS_URL"]
