"""MCP tools in an Agent (on the faux provider), and every client feature against a real server."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import requests

from piagent import AbortController, AbortedError, Agent, ImageContent, ToolExecutionUpdateEvent
from piagent.mcp import MCPClient, MCPProtocolError, MCPRemoteError, MCPTimeoutError, MCPTool
from piagent.testing import faux_message, faux_text, faux_tool_call, register_faux_provider

from .conftest import (
    FILESYSTEM,
    LEGACY_EVERYTHING,
    NODE,
    everything,
    needs_sdk,
    sampling_answer,
    sdk_stdio,
    start_sdk_http,
    stop,
)


def run_agent(tools, calls, **options):
    """An agent on the faux provider that makes ``calls`` (one batch) and then says done."""
    faux = register_faux_provider()
    faux.set_responses([faux_message([faux_tool_call(name, args) for name, args in calls]), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=tools, **options)
    events = []
    agent.subscribe(events.append)
    agent.prompt("go")
    results = [m for m in agent.state.messages if getattr(m, "role", None) == "toolResult"]
    return results, events


def test_reference_server_tools_become_agent_tools_with_their_annotations() -> None:
    with everything() as client:
        tools = {t.name: t for t in client.tools()}
        echo = tools["echo"]
        assert isinstance(echo, MCPTool) and echo.annotations["readOnlyHint"] is True
        assert echo.parameters["properties"]["message"]["type"] == "string"
        (result,), _ = run_agent(list(tools.values()), [("echo", {"message": "hi there"})])
        assert result.content[0].text == "Echo: hi there" and not result.is_error


def test_image_resource_and_link_content_map_to_piagent_content() -> None:
    with everything() as client:
        calls = [
            ("get-tiny-image", {}),
            ("get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
            ("get-resource-links", {"count": 2}),
            ("get-structured-content", {"location": "New York"}),
        ]
        image, reference, links, structured = run_agent(client.tools(), calls)[0]
        assert any(isinstance(b, ImageContent) and b.mime_type == "image/png" for b in image.content)
        assert any(b.text.startswith("[resource demo://resource/dynamic/text/1]") for b in reference.content)
        assert sum(b.text.startswith("[resource link]") for b in links.content) == 2
        assert structured.details["structuredContent"]["temperature"] is not None


def test_two_servers_side_by_side_with_prefixes(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    with everything(prefix="demo_") as demo, MCPClient.stdio(NODE, [FILESYSTEM, str(tmp_path)], prefix="fs_") as fs:
        tools = demo.tools() + fs.tools()
        names = [t.name for t in tools]
        assert "demo_echo" in names and "fs_read_text_file" in names and len(names) == len(set(names))
        echo, read = run_agent(
            tools, [("demo_echo", {"message": "x"}), ("fs_read_text_file", {"path": str(tmp_path / "a.txt")})]
        )[0]
        assert echo.content[0].text == "Echo: x" and read.content[0].text == "alpha"


@needs_sdk
def test_is_error_becomes_an_error_result() -> None:
    with sdk_stdio() as client:
        (result,), _ = run_agent(client.tools(), [("fail", {"reason": "boom"})])
        assert result.is_error and "Error executing tool fail" in result.content[0].text


def test_a_protocol_error_carries_the_servers_message() -> None:
    with MCPClient.stdio(NODE, [LEGACY_EVERYTHING]) as client, pytest.raises(MCPRemoteError) as raised:
        client.call_tool("nope")
    assert "Unknown tool: nope" in str(raised.value) and raised.value.code == -32603


@needs_sdk
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_a_parallel_batch_shares_one_connection_and_reports_progress(protocol: str) -> None:
    with sdk_stdio(protocol) as client:
        results, events = run_agent(
            client.tools(), [("count", {"steps": 3}), ("count", {"steps": 2}), ("add", {"a": 1, "b": 1})]
        )
        assert [r.content[0].text for r in results[:2]] == ["counted to 3", "counted to 2"]
        updates = [e.partial_result.content[0].text for e in events if isinstance(e, ToolExecutionUpdateEvent)]
        assert "progress 3/3: step 3" in updates and "progress 2/2: step 2" in updates
        assert len(updates) == 5


def _cancel_while_waiting(client: MCPClient) -> None:
    """Start wait_forever, prove another call still runs beside it, abort it: it returns at once."""
    controller = AbortController()
    outcome: list = []

    def wait() -> None:
        try:
            client.call_tool("wait_forever", signal=controller.signal)
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    while "started=1" not in client.call_tool("calls_seen")["content"][0]["text"]:
        pass  # multiplexed: these calls are answered while wait_forever runs
    controller.abort("user pressed stop")
    worker.join(timeout=5)
    assert not worker.is_alive() and isinstance(outcome[0], AbortedError)
    server_saw_the_cancellation(client)


def server_saw_the_cancellation(client: MCPClient) -> None:
    """The server counts the cancelled call (it may take a moment to learn of it)."""
    deadline = time.monotonic() + 20
    while "cancelled=1" not in client.call_tool("calls_seen")["content"][0]["text"]:
        assert time.monotonic() < deadline, "the server never saw the cancellation"


@needs_sdk
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_abort_cancels_the_call_on_the_server_over_stdio(protocol: str) -> None:
    with sdk_stdio(protocol) as client:
        _cancel_while_waiting(client)


@needs_sdk
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_abort_cancels_the_call_on_the_server_over_http(protocol: str) -> None:
    process, url = start_sdk_http()
    try:
        with MCPClient.http(url, protocol=protocol) as client:
            _cancel_while_waiting(client)
    finally:
        stop(process)


@needs_sdk
def test_a_call_that_outlives_its_timeout_fails_and_is_cancelled() -> None:
    with sdk_stdio("2025-11-25", timeout=0.5) as client:
        with pytest.raises(MCPTimeoutError, match="tools/call"):
            client.call_tool("wait_forever")
        server_saw_the_cancellation(client)


def test_sampling_without_a_callback_gets_a_clear_error_not_a_hang() -> None:
    """The 2024-11-05 server sends sampling/createMessage without checking our capabilities."""
    refused = pytest.raises(MCPRemoteError, match="sampling/createMessage is not supported by this client")
    with MCPClient.stdio(NODE, [LEGACY_EVERYTHING]) as client, refused:
        client.call_tool("sampleLLM", {"prompt": "hi", "maxTokens": 5})
    with MCPClient.stdio(NODE, [LEGACY_EVERYTHING], sampling=sampling_answer("sampled words")) as client:
        result = client.call_tool("sampleLLM", {"prompt": "hi", "maxTokens": 5})
        assert "sampled words" in result["content"][0]["text"]


def test_elicitation_fills_defaults_the_callback_left_out() -> None:
    answers: list = []

    def accept_nothing(params: dict) -> dict:
        answers.append(params)
        return {"action": "accept", "content": {}}

    with everything(elicitation=accept_nothing) as client:
        result = client.call_tool("trigger-elicitation-request")
        schema = answers[0]["requestedSchema"]["properties"]
        defaults = {k: v["default"] for k, v in schema.items() if "default" in v}
        text = " ".join(b.get("text", "") for b in result["content"])
        assert defaults and all(str(value) in text for value in defaults.values() if not isinstance(value, list))


@needs_sdk
def test_input_required_rounds_are_capped() -> None:
    capped = pytest.raises(MCPProtocolError, match="still wanted input after 0 rounds")
    with sdk_stdio("2026-07-28", max_input_rounds=0, sampling=sampling_answer("x")) as client, capped:
        client.call_tool("colour")


@needs_sdk
def test_server_log_messages_go_to_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    with sdk_stdio("2025-11-25") as client, caplog.at_level(logging.INFO, logger="piagent.mcp.server"):
        client.call_tool("note", {"text": "the note"})
    assert any("the note" in r.getMessage() for r in caplog.records if r.name == "piagent.mcp.server")


def _added_tool_reaches_the_next_turn(client: MCPClient) -> None:
    faux = register_faux_provider()
    seen: list = []

    def second_turn(context, options, state, model):
        seen.append([t.name for t in context.tools])
        return faux_message([faux_tool_call("fresh", {})])

    faux.set_responses(
        [faux_message([faux_tool_call("add_tool", {"name": "fresh"})]), second_turn, faux_message("done")]
    )
    agent = Agent(model=faux.get_model(), tools=client.tools(), prepare_next_turn=client.prepare_next_turn)
    agent.prompt("go")
    assert "fresh" in seen[0]
    last = [m for m in agent.state.messages if getattr(m, "role", None) == "toolResult"][-1]
    assert last.content[0].text == "I am fresh" and not last.is_error


@needs_sdk
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_a_list_change_updates_the_agents_tools_between_turns(protocol: str) -> None:
    with sdk_stdio(protocol) as client:
        _added_tool_reaches_the_next_turn(client)


@needs_sdk
def test_tools_are_not_listed_again_inside_their_ttl_and_are_after_it() -> None:
    with sdk_stdio("2026-07-28", env={"TOOLS_TTL_MS": "60000"}) as client:
        client.tools()
        client.call_tool("add_tool_quietly", {"name": "quiet"})
        assert "quiet" not in [t.name for t in client.tools()] and not client.tools_changed()
    with sdk_stdio("2026-07-28", env={"TOOLS_TTL_MS": "300"}) as client:
        client.tools()
        client.call_tool("add_tool_quietly", {"name": "quiet"})
        time.sleep(0.35)  # the TTL itself is what is tested
        assert client.tools_changed() and "quiet" in [t.name for t in client.tools()]


@needs_sdk
def test_custom_headers_reach_the_server_and_stay_out_of_reprs_and_errors(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, headers={"Authorization": "Bearer s3cret"}) as client:
        assert client.call_tool("authorization")["content"][0]["text"] == "Bearer s3cret"
        assert "s3cret" not in repr(client) and "s3cret" not in repr(client.tools())
    port = sdk_http.rsplit(":", 1)[1].split("/")[0]
    with pytest.raises(Exception) as raised:
        MCPClient.http(f"http://127.0.0.1:{int(port) + 1}/mcp", headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in str(raised.value)


@needs_sdk
def test_an_expired_session_is_initialised_again(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, protocol="2025-11-25") as client:
        old = client._transport.session_id
        requests.delete(sdk_http, headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": "2025-11-25"}, timeout=5)
        result = client.call_tool("add", {"a": 1, "b": 2})
        assert '"total": 3' in result["content"][0]["text"]
        assert client._transport.session_id not in (None, old)


@needs_sdk
def test_a_response_stream_closed_by_the_server_is_resumed(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, protocol="2025-11-25") as client:
        updates: list = []
        result = client.call_tool("interrupted", on_progress=updates.append)
        assert result["content"][0]["text"] == "answered after the break"
        assert [u["message"] for u in updates] == ["before the break", "after the break"]


def test_text_content_of_a_faux_answer_is_untouched() -> None:
    """The agent's own text still flows as usual around MCP tools."""
    faux = register_faux_provider()
    faux.set_responses([faux_message([faux_text("plain")])])
    with everything() as client:
        agent = Agent(model=faux.get_model(), tools=client.tools())
        assert agent.prompt("hi").text == "plain"


def test_structured_content_of_an_mcp_result_is_the_tool_results_structured_content() -> None:
    with everything() as client:
        tool = next(t for t in client.tools() if t.name == "get-structured-content")
        assert tool.output_schema is not None
        (result,), events = run_agent([tool], [("get-structured-content", {"location": "New York"})])
        end = next(e for e in events if e.type == "tool_execution_end")
        assert end.result.structured_content == result.details["structuredContent"]
        assert end.result.structured_content["temperature"] is not None
