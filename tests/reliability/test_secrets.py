"""API keys never leak: not in a repr, a log record, an exception, ``to_dict()`` or an error message.

Every key source is tried (``api_key`` options, ``get_api_key``, the environment, a key put in
``Model.headers``) over all four provider APIs, against a server that echoes the key back in
its error bodies and in a broken stream. Each case first checks that the key really was sent
(in a header, never in the URL), so that "not found" cannot pass vacuously.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest

from piagent import Agent, AgentContext, AgentLoopConfig, UserMessage, run_agent_loop
from piagent.ai import Context, Model, StreamOptions, complete
from tests.reliability.wires import GOOGLE, Wire
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.timeout(20)

KEY = "sk-live-SECRET-7f3a9c1e5b2d4680"
JSON = {"Content-Type": "application/json"}
SOURCES = ["options", "get_api_key", "environment", "model_headers"]


def auth_headers(wire: Wire, key: str) -> dict[str, str]:
    """The header each API takes its key in, as a user would put it in ``Model.headers``."""
    if wire.key_header == "authorization":
        return {"Authorization": f"Bearer {key}"}
    return {wire.key_header: key}


def script_leaky_server(server: ScriptedServer, wire: Wire) -> None:
    """A 401 whose body echoes the key, a stream that breaks on a chunk quoting it, then a good answer."""
    server.reply([wire.error_body(401, f"Incorrect API key provided: {KEY}. Find yours at ...")], 401, headers=JSON)
    server.reply(wire.head() + [f'data: {{"echo": "{KEY}" oops\n\n'.encode()])
    server.reply(wire.text("Fine."))


def run_three_prompts(
    source: str, server: ScriptedServer, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Any], list[Any]]:
    """Three prompts with the key from ``source``; returns (transcript, things to repr)."""
    model = wire.model(
        server.url, provider="vendor", headers=auth_headers(wire, KEY) if source == "model_headers" else None
    )
    if source == "options":  # the low-level loop takes the key as an option
        config = AgentLoopConfig(model=model, api_key=KEY, max_retries=0)
        context = AgentContext()
        for prompt in ("one", "two", "three"):
            context.messages.extend(run_agent_loop([UserMessage(prompt)], context, config, lambda event: None))
        return context.messages, [config, model, context]
    if source == "environment":
        monkeypatch.setenv("VENDOR_API_KEY", KEY)
    get_api_key = (lambda provider: KEY) if source == "get_api_key" else None
    agent = Agent(model=model, get_api_key=get_api_key)
    results = [agent.prompt(prompt) for prompt in ("one", "two", "three")]
    return agent.state.messages, [agent, agent.state, model, *results]


@pytest.mark.parametrize("source", SOURCES)
def test_a_key_never_leaks_from_any_source(server, wire, source, monkeypatch, caplog):
    script_leaky_server(server, wire)
    caplog.set_level(logging.DEBUG, logger="piagent")
    caplog.set_level(logging.DEBUG, logger="urllib3")
    messages, objects = run_three_prompts(source, server, wire, monkeypatch)

    # the key was sent, in its header, and never in the URL
    assert len(server.requests) == 3
    for request in server.requests:
        assert KEY in request.headers[wire.key_header] and KEY not in request.path
    # the errors are readable and redacted
    errors = [m.error_message for m in messages if m.role == "assistant" and m.error_message]
    assert len(errors) == 2
    assert errors[0] == "HTTP 401: Incorrect API key provided: [REDACTED]. Find yours at ..."
    assert errors[1].startswith("Invalid JSON in stream event") and "[REDACTED]" in errors[1]
    assert messages[-1].text == "Fine."
    # nowhere else either
    assert KEY not in json.dumps([m.to_dict() for m in messages])
    for thing in [*objects, *messages]:
        assert KEY not in repr(thing) and KEY not in str(thing)
    assert caplog.records, "the DEBUG loggers said nothing: the check would be empty"
    for record in caplog.records:
        text = record.getMessage() + ("".join(traceback.format_exception(*record.exc_info)) if record.exc_info else "")
        assert KEY not in text, record


def test_a_key_with_a_trailing_newline_works_and_never_shows(server, wire):
    server.reply(wire.text("ok"))
    message = complete(wire.model(server.url), Context("", [UserMessage("hi")]), StreamOptions(api_key=KEY + "\n"))
    assert message.text == "ok" and server.requests[0].headers[wire.key_header].endswith(KEY)


def test_a_netrc_entry_for_the_host_never_replaces_the_key(server, wire, tmp_path, monkeypatch):
    # requests, trusting the environment, would put ~/.netrc's login for the host over the key
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password netrc-SECRET\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    server.reply(wire.text("ok"))
    message = complete(wire.model(server.url), Context("", [UserMessage("hi")]), StreamOptions(api_key=KEY))
    assert message.text == "ok" and server.requests[0].headers[wire.key_header].endswith(KEY)
    assert "Basic" not in server.requests[0].headers.get("authorization", "")


def test_a_user_and_password_in_the_base_url_are_still_sent_as_basic_auth(server):
    server.reply(GOOGLE.text("ok"))  # Gemini: its key goes in its own header, beside the Basic login
    model = GOOGLE.model(server.url.replace("http://", "http://alice:pw@"))
    assert complete(model, Context("", [UserMessage("hi")]), StreamOptions(api_key=KEY)).text == "ok"
    headers = server.requests[0].headers
    assert headers["authorization"] == "Basic YWxpY2U6cHc=" and headers[GOOGLE.key_header] == KEY


def test_a_malformed_key_in_model_headers_is_redacted_from_the_client_error(wire):
    # requests refuses the header and quotes its value (repr-escaped) in the exception text
    model = wire.model("http://127.0.0.1:9", headers=auth_headers(wire, KEY + "\n"))
    message = complete(model, Context("", [UserMessage("hi")]), StreamOptions(api_key="other-key", max_retries=0))
    assert message.stop_reason == "error" and "header value" in message.error_message
    assert KEY not in message.error_message and "[REDACTED]" in message.error_message


def test_connection_errors_never_carry_the_key(wire, caplog):
    caplog.set_level(logging.DEBUG, logger="urllib3")
    caplog.set_level(logging.DEBUG, logger="piagent")
    message = complete(
        wire.model("http://127.0.0.1:9"),
        Context("", [UserMessage("hi")]),
        StreamOptions(api_key=KEY, max_retries=1, max_retry_delay_ms=1),
    )
    assert message.error_message.startswith("Connection error: HTTPConnection(host='127.0.0.1', port=9)")
    assert KEY not in message.error_message
    assert all(KEY not in record.getMessage() for record in caplog.records)


def test_reprs_of_options_and_models_hide_keys_and_headers():
    options = StreamOptions(api_key=KEY, headers={"Authorization": f"Bearer {KEY}"})
    config = AgentLoopConfig(api_key=KEY, headers={"x-api-key": KEY}, get_api_key=lambda provider: KEY)
    model = Model("m", headers={"x-goog-api-key": KEY})
    for thing in (options, config, model, Agent(model=model, get_api_key=lambda provider: KEY)):
        assert KEY not in repr(thing) and KEY not in str(thing)
