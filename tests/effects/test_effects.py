"""Side effects exactly once (docs/effects.md): intents before effects, recovery by policy, keys."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import pytest

from piagent import (
    Agent,
    AgentTool,
    AgentToolResult,
    RecoveryContext,
    RecoveryDecision,
    TextContent,
    ToolIntent,
    idempotency_key,
    tool,
)
from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession, JsonlStore, Session, SqliteSession
from piagent.testing import FauxProvider, faux_message, faux_tool_call

from .zygote import Zygote, settled

INTENT = "piagent.tool_intent"


def open_session(kind: str, path: Path) -> Session:
    return JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "run-1")


def intent_entries(session: Session) -> list[dict[str, Any]]:
    return [e["data"] for e in session.entries() if e["type"] == "custom" and e.get("customType") == INTENT]


def tool_results(agent: Agent) -> dict[str, Any]:
    return {m.tool_call_id: m for m in agent.state.messages if m.role == "toolResult"}


def shop_tools(ran: list[str]) -> tuple[AgentTool, AgentTool]:
    """``charge`` (replay "never", the default: appends its item to ``ran``) and ``price`` (replay "safe")."""

    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        ran.append(item)
        return "ok"

    @tool(replay="safe")
    def price(item: str) -> str:
        """Look a price up."""
        return "3"

    return charge, price


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_calls_intent_is_stored_before_it_runs_with_its_arguments_worker_and_key(
    faux: FauxProvider, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / f"s.{kind}"
    seen: list[tuple[list[dict[str, Any]], Optional[str]]] = []

    @tool
    def send(to: str, times: int) -> str:
        """Send a message."""
        reader = open_session(kind, path)  # what another process reading the store finds now
        seen.append((intent_entries(reader), idempotency_key()))
        reader.close()
        return "sent"

    call = faux_tool_call("send", {"to": "ada", "times": "2"})
    faux.set_responses([faux_message([call]), faux_message("done")])
    session = open_session(kind, path)
    Agent(model=faux.get_model(), tools=[send], session=session).prompt("send it")
    [(intents, key)] = seen
    [intent] = intents
    assert intent["toolCallId"] == call.id and intent["toolName"] == "send"
    assert intent["arguments"] == {"to": "ada", "times": 2}  # validated: the string became an int
    assert intent["key"] == key == f"{session.id}:{call.id}"
    assert intent["worker"].endswith(f":{__import__('os').getpid()}") and intent["recordedAt"] > 0
    assert idempotency_key() is None  # only inside a call
    session.close()


class CountingStore(JsonlStore):
    """A user's store that counts its appends and can refuse the ones holding intents (a full disk)."""

    def __init__(self, path: Path, refuse_intents: bool = False) -> None:
        super().__init__(str(path))
        self.intent_appends: list[int] = []  # the intents of each append that stores some
        self.refuse_intents = refuse_intents

    def append(self, header: dict[str, Any], entries: Sequence[dict[str, Any]]) -> None:
        if self.refuse_intents and any(e.get("customType") == INTENT for e in entries):
            raise OSError(28, "No space left on device")
        self.intent_appends.extend(
            [sum(e.get("customType") == INTENT for e in entries)] if entries[0].get("customType") == INTENT else []
        )
        super().append(header, entries)


def test_a_parallel_batch_stores_its_intents_in_one_write_and_safe_tools_none(
    faux: FauxProvider, tmp_path: Path
) -> None:
    store = CountingStore(tmp_path / "s.jsonl")
    ran: list[str] = []

    charge, price = shop_tools(ran)
    calls = [faux_tool_call("charge", {"item": i}) for i in "abc"] + [faux_tool_call("price", {"item": "a"})]
    faux.set_responses([faux_message(calls), faux_message("done")])
    session = Session(store)
    Agent(model=faux.get_model(), tools=[charge, price], session=session).prompt("go")
    assert sorted(ran) == ["a", "b", "c"]
    stored = intent_entries(session)
    assert [i["toolCallId"] for i in stored] == [c.id for c in calls[:3]]  # none for the safe tool
    assert store.intent_appends == [3]  # one write for the batch


def test_a_call_whose_intent_cannot_be_stored_does_not_run_and_gets_an_error_result(
    faux: FauxProvider, tmp_path: Path
) -> None:
    ran: list[str] = []

    charge, price = shop_tools(ran)
    calls = [faux_tool_call("charge", {"item": "a"}), faux_tool_call("price", {"item": "a"})]
    faux.set_responses([faux_message(calls), faux_message("done")])
    session = Session(CountingStore(tmp_path / "s.jsonl", refuse_intents=True))
    agent = Agent(model=faux.get_model(), tools=[charge, price], session=session)
    agent.prompt("go")
    assert ran == []
    results = tool_results(agent)
    assert results[calls[0].id].is_error
    assert "was not executed: its intent could not be recorded" in results[calls[0].id].content[0].text
    assert "No space left on device" in results[calls[0].id].content[0].text
    assert results[calls[1].id].is_error  # the batch's one write failed: none of it runs


def interrupted_session(path: Path, calls: list[Any], with_intent: Sequence[str]) -> JsonlSession:
    """The state a run killed mid-batch leaves: the batch's message, intents for some calls, no results."""
    session = JsonlSession(path)
    session.append_message(UserMessage("go"))
    session.append_message(faux_message(calls))
    session.record_intents(
        [
            ToolIntent(c.id, c.name, c.arguments, 1.0, "host:1", f"{session.id}:{c.id}")
            for c in calls
            if c.id in with_intent
        ]
    )
    return session


def test_on_resume_a_never_call_with_an_intent_is_reported_interrupted_and_one_without_is_left_to_the_model(
    faux: FauxProvider, tmp_path: Path
) -> None:
    ran: list[str] = []

    charge, _ = shop_tools(ran)
    started, never_started = faux_tool_call("charge", {"item": "a"}), faux_tool_call("charge", {"item": "b"})
    interrupted_session(tmp_path / "s.jsonl", [started, never_started], [started.id]).close()
    answered: list[set[str]] = []

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        answered.append({m.tool_call_id for m in context.messages if m.role == "toolResult"})
        return faux_message("checked")

    faux.set_responses([answer])
    agent = Agent(model=faux.get_model(), tools=[charge], session=JsonlSession(tmp_path / "s.jsonl"))
    events: list[Any] = []
    agent.subscribe(lambda e: events.append(e) if e.type == "tool_recovery" else None)
    agent.continue_()
    assert ran == []  # b's intent was never stored: it never started, and is left to the model
    result = tool_results(agent)[started.id]
    assert result.is_error and "was interrupted" in result.content[0].text and "not run again" in result.content[0].text
    assert [(e.tool_call_id, e.action, e.decided_by) for e in events] == [(started.id, "fail", "policy")]
    assert answered == [{started.id}]  # b's "No result provided" is added in the request, not stored


def test_on_resume_a_safe_call_runs_again_with_the_same_idempotency_key(faux: FauxProvider, tmp_path: Path) -> None:
    keys: list[Optional[str]] = []

    @tool(replay="safe")
    def price(item: str) -> str:
        """Look a price up."""
        keys.append(idempotency_key())
        return "3"

    call = faux_tool_call("price", {"item": "a"})
    session = interrupted_session(tmp_path / "s.jsonl", [call], [call.id])
    faux.set_responses([faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[price], session=session)
    agent.continue_()
    assert keys == [f"{session.id}:{call.id}"]
    assert not tool_results(agent)[call.id].is_error


def test_recover_tool_call_decides_per_call_rerun_done_or_fail(faux: FauxProvider, tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        ran.append(item)
        return "charged again"

    calls = [faux_tool_call("charge", {"item": i}) for i in ("rerun", "done", "fail", "policy")]
    session = interrupted_session(tmp_path / "s.jsonl", calls, [c.id for c in calls])
    seen: list[RecoveryContext] = []

    def recover(ctx: RecoveryContext, signal: Any) -> Optional[RecoveryDecision]:
        seen.append(ctx)
        item = ctx.tool_call.arguments["item"]
        if item == "rerun":
            return RecoveryDecision("rerun")
        if item == "done":
            return RecoveryDecision("done", AgentToolResult([TextContent("the ledger says it was charged")]))
        if item == "fail":
            return RecoveryDecision("fail", reason="refunded by the operator")
        return None

    faux.set_responses([faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[charge], session=session, recover_tool_call=recover)
    agent.continue_()
    assert ran == ["rerun"]
    results = {c.arguments["item"]: tool_results(agent)[c.id] for c in calls}
    assert results["rerun"].content[0].text == "charged again"
    assert (results["done"].is_error, results["done"].content[0].text) == (False, "the ledger says it was charged")
    assert (results["fail"].is_error, results["fail"].content[0].text) == (True, "refunded by the operator")
    assert results["policy"].is_error and "was interrupted" in results["policy"].content[0].text
    assert [c.intent.tool_call_id for c in seen] == [c.id for c in calls] and seen[0].tool is charge


def test_a_process_killed_after_the_effect_resumes_without_repeating_it(tmp_path: Path) -> None:
    zygote = Zygote()
    try:
        session, ledger, trace = tmp_path / "s.jsonl", tmp_path / "ledger", tmp_path / "trace"
        assert zygote.run("jsonl", session, ledger, trace, "after effect c") == -9
        assert zygote.run("jsonl", session, ledger, trace) == 0
    finally:
        zygote.close()
    found = settled("jsonl", session, ledger)
    assert sorted(found.effects.values()) == [1, 1, 1]  # a, b and c, once each
    [c_key] = [line.split()[0] for line in ledger.read_text().splitlines() if line.endswith(" c")]
    result = found.results[c_key.split(":", 1)[1]]
    assert result["isError"] and "was interrupted" in result["content"][0]["text"]
    assert found.final == "Every charge is settled."


def test_a_prompt_on_a_session_reloaded_after_a_crash_settles_the_interrupted_call_before_the_new_request(
    faux: FauxProvider, tmp_path: Path
) -> None:
    session, ledger, trace = tmp_path / "s.jsonl", tmp_path / "ledger", tmp_path / "trace"
    zygote = Zygote()
    try:
        assert zygote.run("jsonl", session, ledger, trace, "after effect c") == -9
    finally:
        zygote.close()
    ran: list[str] = []
    charge, price = shop_tools(ran)
    requests: list[list[Any]] = []

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        requests.append(list(context.messages))
        return faux_message("c may have been charged: I will check.")

    faux.set_responses([answer])
    agent = Agent(model=faux.get_model(), tools=[charge, price], session=JsonlSession(session))
    [interrupted] = agent.state.messages[-1].tool_calls
    events: list[Any] = []
    agent.subscribe(lambda e: events.append(e) if e.type == "tool_recovery" else None)
    agent.prompt("Did it work?")
    assert ran == []  # c is not charged a second time
    [(call_id, action, decided_by)] = [(e.tool_call_id, e.action, e.decided_by) for e in events]
    assert (call_id, action, decided_by) == (interrupted.id, "fail", "policy")
    [request] = requests
    result, question = request[-2:]  # the settled call comes before the new prompt, in the request
    assert result.role == "toolResult" and result.tool_call_id == interrupted.id
    assert result.is_error and "was interrupted" in result.content[0].text
    assert question.role == "user" and question.content[0].text == "Did it work?"
    stored = [m for m in JsonlSession(session).messages() if m.role in ("toolResult", "user")]
    assert [m.role for m in stored[-2:]] == ["toolResult", "user"]  # and so in the session


def test_a_sequential_batch_stores_each_calls_intent_just_before_it_runs(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[list[str]] = []

    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        seen.append([i["toolCallId"] for i in intent_entries(JsonlSession(path))])
        return "ok"

    calls = [faux_tool_call("charge", {"item": i}) for i in "ab"]
    faux.set_responses([faux_message(calls), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[charge], session=JsonlSession(path), tool_execution="sequential")
    agent.prompt("go")
    assert seen == [[calls[0].id], [calls[0].id, calls[1].id]]


def nested_call(session: Session, tools: Sequence[AgentTool], name: str, call_id: str) -> Any:
    """What a tool calling another tool does: ``run_tool_call`` with a config naming the session as journal."""
    from piagent import AgentContext, AgentLoopConfig, run_tool_call
    from piagent.ai import Model

    model = Model(id="mock", api="openai-responses", provider="openai")
    return run_tool_call(
        faux_tool_call(name, {"item": "a"}, call_id),
        assistant_message=faux_message([faux_tool_call("script", {}, "outer")]),
        context=AgentContext("", [], list(tools)),
        config=AgentLoopConfig(model=model, intent_journal=session),
    )


def test_run_tool_call_stores_the_calls_intent_before_it_runs_and_a_safe_tools_none(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[tuple[list[str], Optional[str]]] = []

    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        seen.append(([i["toolCallId"] for i in intent_entries(JsonlSession(path))], idempotency_key()))
        return "charged"

    _, price = shop_tools([])
    session = JsonlSession(path)
    charged = nested_call(session, [charge, price], "charge", "inner-1")
    priced = nested_call(session, [charge, price], "price", "inner-2")
    assert (charged.is_error, priced.is_error) == (False, False)
    assert seen == [(["inner-1"], f"{session.id}:inner-1")]  # stored before execute, with its key
    [intent] = intent_entries(JsonlSession(path))  # the safe call stored none
    assert (intent["toolName"], intent["arguments"]) == ("charge", {"item": "a"})


def test_run_tool_call_whose_intent_cannot_be_stored_does_not_run_and_returns_an_error(tmp_path: Path) -> None:
    ran: list[str] = []
    charge, _ = shop_tools(ran)
    outcome = nested_call(Session(CountingStore(tmp_path / "s.jsonl", refuse_intents=True)), [charge], "charge", "c1")
    assert ran == []
    assert outcome.is_error
    assert "was not executed: its intent could not be recorded" in outcome.result.content[0].text
    assert "No space left on device" in outcome.result.content[0].text


def test_an_intent_journal_without_the_journal_methods_is_refused_with_a_clear_error() -> None:
    from piagent import InvalidTypeError

    with pytest.raises(InvalidTypeError, match=r"intent_journal must have scope, record_intents\(\) and intents\(\)"):
        Agent(intent_journal=object())
