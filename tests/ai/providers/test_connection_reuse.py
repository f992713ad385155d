"""Providers stop reading at the logical end of a stream, then hand the connection back for reuse.

Closing a response before its chunked body is read to the end drops the TCP connection, so
every model call would open a new one. ``HttpStream.release()`` reads the little that is left
(the chunked terminator) and gives up quickly when the server keeps the body open.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from piagent.ai import Context, StreamOptions, UserMessage, complete
from tests.ai.providers import test_anthropic as anthropic
from tests.ai.providers import test_openai_completions as completions
from tests.ai.providers import test_openai_responses as responses
from tests.ai.providers.openai_wire import chat_text, responses_text
from tests.support.scripted_server import STALL, ScriptedServer

Setup = tuple[Callable[[ScriptedServer], Any], str, Callable[[str], list[bytes]]]

PROVIDERS = {
    "openai-completions": (completions.model_for, completions.KEY, lambda text: chat_text(text)),
    "openai-responses": (responses.model_for, responses.KEY, lambda text: responses_text(text)),
    "anthropic-messages": (
        lambda server: anthropic.make_model(server.url),
        anthropic.KEY,
        lambda text: anthropic.frames(*anthropic.text_stream(text)),
    ),
}


def ask(server: ScriptedServer, setup: Setup) -> Any:
    model_for, key, _ = setup
    return complete(model_for(server), Context(messages=[UserMessage("Hi")]), StreamOptions(api_key=key))


@pytest.mark.parametrize("api", sorted(PROVIDERS))
def test_consecutive_calls_share_one_connection(server: ScriptedServer, api: str) -> None:
    setup = PROVIDERS[api]
    server.reply(setup[2]("one"))
    server.reply(setup[2]("two"))
    assert ask(server, setup).text == "one"
    assert ask(server, setup).text == "two"
    assert server.requests[0].peer == server.requests[1].peer


@pytest.mark.parametrize("api", sorted(PROVIDERS))
def test_a_server_that_keeps_the_body_open_after_the_end_costs_a_new_connection_not_a_hang(
    server: ScriptedServer, api: str
) -> None:
    setup = PROVIDERS[api]
    server.reply(setup[2]("one") + [STALL])
    server.reply(setup[2]("two"))
    first = ask(server, setup)
    assert (first.text, first.stop_reason, first.error_message) == ("one", "stop", None)
    assert ask(server, setup).text == "two"
    assert server.requests[0].peer != server.requests[1].peer
