"""The MCP client against hostile servers: real processes and real loopback HTTP servers.

A server is third-party code: whatever it does, a call ends within its timeout or abort, memory
and threads stay bounded, and ``close()`` returns. Thread counts and memory are measured in a
subprocess (``run_client``), so that nothing another test left behind is counted.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
from typing import Any, Callable

import pytest

from piagent import AbortController, AbortedError
from piagent.mcp import MCPClient, MCPConnectionError, MCPProtocolError, MCPTimeoutError
from piagent.testing import faux_message

from .support.mcp_http_server import INITIALIZE, MethodServer, json_answer
from .support.waits import WAIT, wait_until
from .test_cli import run_cli

HOSTILE = os.path.join(os.path.dirname(__file__), "support", "hostile_mcp_server.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hostile(*extra_tools: str, **options: Any) -> MCPClient:
    return MCPClient.stdio(sys.executable, [HOSTILE, *extra_tools], protocol="2025-11-25", **options)


def outcome_within(fn: Callable[[], Any], timeout: float = WAIT) -> Any:
    """``fn()``'s result or exception, run on a thread; fails the test if it has not ended by ``timeout``."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still blocked after {timeout} s"
    return box[0]


def run_client(*code: str, timeout: float = 60) -> dict:
    """Run the ``code`` parts in a fresh interpreter (``HOSTILE`` defined); they print one JSON object last."""
    prelude = f"import json, sys, threading\nHOSTILE = {HOSTILE!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + "".join(textwrap.dedent(part) for part in code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- stdio ------------------------------------------------------------------------------------


def test_a_server_that_stops_reading_stdin_blocks_neither_a_call_nor_its_abort_nor_close() -> None:
    client = hostile(timeout=30)
    client.call_tool("stop_reading")
    big = "x" * 1_000_000  # far more than a pipe holds
    timed_out = outcome_within(lambda: client.call_tool("echo", {"text": big}, timeout=0.5))
    assert isinstance(timed_out, MCPTimeoutError)
    controller = AbortController()
    threading.Timer(0.2, controller.abort).start()
    aborted = outcome_within(lambda: client.call_tool("echo", {"text": big}, signal=controller.signal))
    assert isinstance(aborted, AbortedError)
    assert outcome_within(client.close, timeout=3 * WAIT) is None


def test_the_process_exits_after_an_aborted_call_to_a_server_that_stops_reading() -> None:
    result = run_client(
        """
        from piagent import AbortController, AbortedError
        from piagent.mcp import MCPClient
        client = MCPClient.stdio(sys.executable, [HOSTILE], protocol="2025-11-25")
        client.call_tool("stop_reading")
        controller = AbortController()
        threading.Timer(0.2, controller.abort).start()
        try:
            client.call_tool("echo", {"text": "x" * 1_000_000}, signal=controller.signal)
        except AbortedError:
            print(json.dumps({"aborted": True}))
        """,
        timeout=30,
    )
    assert result == {"aborted": True}


def test_a_server_that_never_reads_its_input_ends_the_connection_once_the_bound_is_queued() -> None:
    from piagent.mcp._stdio import MAX_PENDING_INPUT_BYTES

    with hostile(timeout=30) as client:
        client.call_tool("stop_reading")
        chunk = "x" * (MAX_PENDING_INPUT_BYTES // 4)
        errors = [outcome_within(lambda: client.call_tool("echo", {"text": chunk}, timeout=0.2)) for _ in range(4)]
        assert isinstance(errors[-1], MCPConnectionError)
        assert "does not read its input" in str(errors[-1])
        assert client.call_tool("echo", {"text": "a new server"})["content"][0]["text"] == "a new server"


def test_one_message_larger_than_the_unread_bound_goes_to_a_server_that_reads() -> None:
    from piagent.mcp._stdio import MAX_PENDING_INPUT_BYTES

    with hostile(timeout=60) as client:
        padding = "x" * (MAX_PENDING_INPUT_BYTES + 1)
        assert client.call_tool("stderr_line", {"size": 1, "padding": padding})["content"][0]["text"] == "done"


def test_a_progress_callback_that_blocks_delays_no_other_calls_timeout_or_abort() -> None:
    """Whichever thread reads stdout runs a progress callback: while one blocks, a call made
    beside it still ends at its timeout and at its abort (it never waits for the callback)."""
    release, entered = threading.Event(), threading.Event()

    def blocking(params: dict) -> None:
        entered.set()
        release.wait()

    with hostile(timeout=30) as client:
        slow = threading.Thread(target=client.call_tool, args=("progress", {}), kwargs={"on_progress": blocking})
        slow.start()
        try:
            assert entered.wait(WAIT)
            timed_out = outcome_within(lambda: client.call_tool("echo", {"text": "x"}, timeout=0.5))
            assert isinstance(timed_out, MCPTimeoutError)
            controller = AbortController()
            threading.Timer(0.3, controller.abort).start()
            aborted = outcome_within(lambda: client.call_tool("echo", {"text": "y"}, signal=controller.signal))
            assert isinstance(aborted, AbortedError)
        finally:
            release.set()
            slow.join(WAIT)
        assert client.call_tool("echo", {"text": "after"})["content"][0]["text"] == "after"


def test_a_deeply_nested_line_fails_the_call_and_the_connection_keeps_working() -> None:
    with hostile(timeout=None) as client:
        error = outcome_within(lambda: client.call_tool("nested", {"depth": 100_000}))
        assert isinstance(error, MCPProtocolError)
        assert "nested too deeply" in str(error)
        assert client.call_tool("echo", {"text": "still here"})["content"][0]["text"] == "still here"


def test_server_requests_are_answered_on_a_bounded_number_of_threads() -> None:
    result = run_client(
        """
        from piagent.mcp import MCPClient
        from piagent.mcp._connection import ANSWER_THREADS, MAX_SERVER_REQUESTS
        release, entered, peak = threading.Event(), [], [0]

        def sampling(params):
            entered.append(1)
            peak[0] = max(peak[0], threading.active_count())
            release.wait(30)
            return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

        client = MCPClient.stdio(sys.executable, [HOSTILE], protocol="2025-11-25", sampling=sampling)
        before = threading.active_count()
        client.call_tool("ping_flood", {"count": 3000})
        client.call_tool("sample_flood", {"count": 1000})
        client.call_tool("echo", {"text": "all sent"})  # answered after the floods were read
        peak[0] = max(peak[0], threading.active_count())
        release.set()
        client.close()
        print(json.dumps({"extra": peak[0] - before, "answer_threads": ANSWER_THREADS}))
        """
    )
    assert result["extra"] <= result["answer_threads"]


def test_an_output_schema_pattern_that_takes_exponential_time_is_refused_before_it_meets_a_result() -> None:
    # re holds the GIL while it matches: unrefused, this call would freeze every thread of the process
    outcome = run_client(
        """
        from piagent import AbortController
        from piagent.mcp import MCPClient, MCPProtocolError
        with MCPClient.stdio(sys.executable, [HOSTILE, "slow_pattern"], protocol="2025-11-25") as client:
            tool = next(t for t in client.tools() if t.name == "slow_pattern")
            try:
                tool.execute("c", {}, AbortController().signal, lambda update: None)
                print(json.dumps({"error": None}))
            except MCPProtocolError as exc:
                print(json.dumps({"error": str(exc)}))
        """,
        timeout=30,
    )
    assert "outputSchema is refused" in outcome["error"] and "^(a+)+$" in outcome["error"]


def test_a_long_stderr_line_is_logged_cut_to_its_bound(caplog: pytest.LogCaptureFixture) -> None:
    from piagent.mcp._stdio import MAX_STDERR_LINE_BYTES

    size = MAX_STDERR_LINE_BYTES * 4 + 1
    with caplog.at_level(logging.INFO, logger="piagent.mcp.server"), hostile() as client:
        client.call_tool("stderr_line", {"size": size})
    lines = [r.getMessage() for r in caplog.records if r.name == "piagent.mcp.server"]
    assert len(lines) == 1
    assert len(lines[0]) < MAX_STDERR_LINE_BYTES + 100
    assert f"[{size - MAX_STDERR_LINE_BYTES:,} more bytes cut]" in lines[0]


def test_a_64_mib_stderr_line_keeps_the_clients_memory_bounded() -> None:
    result = run_client(
        """
        import resource
        from piagent.mcp import MCPClient
        with MCPClient.stdio(sys.executable, [HOSTILE], protocol="2025-11-25") as client:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            client.call_tool("stderr_line", {"size": 64 * 2**20})
        grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(json.dumps({"grown_mib": grown_mib}))
        """
    )
    assert result["grown_mib"] < 16, result


# -- Streamable HTTP ----------------------------------------------------------------------------


def http_client(server: MethodServer, **options: Any) -> MCPClient:
    return MCPClient.http(server.url, headers={"X-API-Key": "k-secret-123"}, protocol="2025-11-25", **options)


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}]}


def test_a_redirect_to_another_host_gets_no_header_no_session_id_and_no_body() -> None:
    with MethodServer({}) as elsewhere:
        moved = lambda message: (307, {"Location": elsewhere.url}, b"")  # noqa: E731 - a route in one line
        routes = {"initialize": json_answer(INITIALIZE), "tools/call": moved}
        with MethodServer(routes) as server, http_client(server) as client:
            error = outcome_within(lambda: client.call_tool("echo", {"text": "the conversation"}))
        assert isinstance(error, MCPConnectionError)
        assert "a redirect to another origin" in str(error)
        assert elsewhere.methods == []


def test_a_cookie_one_server_sets_reaches_no_other_server_on_the_same_host() -> None:
    def initialize_with_a_cookie(message: dict) -> Any:
        status, headers, body = json_answer(INITIALIZE)(message)
        return status, {**headers, "Set-Cookie": "sid=a-secret; Path=/"}, body

    with MethodServer({"initialize": initialize_with_a_cookie}) as first, http_client(first):
        pass
    with MethodServer({"initialize": json_answer(INITIALIZE)}) as other, http_client(other):
        pass
    assert other.headers and not any("Cookie" in headers for headers in other.headers)


def test_a_key_in_the_servers_url_stays_out_of_errors_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    with MethodServer({}) as elsewhere:
        moved = lambda message: (307, {"Location": elsewhere.url}, b"")  # noqa: E731 - a route in one line
        routes = {"initialize": json_answer(INITIALIZE), "tools/call": moved}
        with MethodServer(routes) as server, caplog.at_level(logging.DEBUG, logger="piagent"):
            url = server.url.replace("http://", "http://user:pw-secret-1@") + "?api_key=k-secret-2"
            with MCPClient.http(url, protocol="2025-11-25") as client:
                errors = [outcome_within(lambda: client.call_tool("echo", {}))]
    with MethodServer({}) as gone:
        pass
    gone_url = gone.url.replace("http://", "http://user:pw-secret-1@") + "?api_key=k-secret-2"
    errors.append(outcome_within(lambda: MCPClient.http(gone_url, protocol="2025-11-25")))
    shown = " ".join([*map(str, errors), *(r.getMessage() for r in caplog.records)])
    assert all(isinstance(error, MCPConnectionError) and "127.0.0.1" in str(error) for error in errors)
    assert "secret" not in shown


def test_a_key_in_an_mcp_url_on_the_command_line_stays_out_of_its_error(faux: Any) -> None:
    with MethodServer({}) as gone:
        pass
    url = gone.url.replace("http://", "http://user:pw-secret-1@") + "?api_key=k-secret-2"
    run = run_cli(faux, "--mcp-url", url, "Hi")
    assert run["code"] != 0 and "--mcp-url http://127.0.0.1" in run["err"]
    assert "secret" not in run["err"] + run["out"]


def _sse_answer(message: dict) -> Any:
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": text_result("ok")}
    return 200, {"Content-Type": "text/event-stream"}, b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"


@pytest.mark.parametrize("answer", [json_answer(text_result("ok")), _sse_answer], ids=["json", "sse"])
def test_calls_whose_answer_ends_its_body_reuse_one_connection(answer: Any) -> None:
    routes = {"initialize": json_answer(INITIALIZE), "tools/call": answer}
    with MethodServer(routes) as server, http_client(server) as c:
        for _ in range(5):
            c.call_tool("echo", {"text": "ok"})
        calls = [peer for method, peer in zip(server.methods, server.peers) if method == "tools/call"]
        assert len(calls) == 5 and len(set(calls)) == 1


def test_a_connection_reused_after_an_answered_stream_sends_a_large_request_whole() -> None:
    """The end of an answered stream is read without waiting; the connection then goes back to
    the pool blocking again, so the next request on it (8 MiB of arguments) is sent whole."""
    routes = {"initialize": json_answer(INITIALIZE), "tools/call": _sse_answer}
    with MethodServer(routes) as server, http_client(server) as c:
        for _ in range(10):  # a connection whose stream end had not arrived yet is closed: try again
            c.call_tool("echo", {"text": "ok"})
            c.call_tool("echo", {"text": "x" * (8 << 20)})  # raises if the request did not reach the server whole
            calls = [peer for method, peer in zip(server.methods, server.peers) if method == "tools/call"]
            if calls[-1] == calls[-2]:
                break
        assert calls[-1] == calls[-2], "no large request went on the connection of the answered stream before it"


def test_an_answered_stream_whose_end_has_not_arrived_never_returns_its_connection_half_read() -> None:
    """The end of an answered stream is read only if it has arrived: when it has not, its
    connection is closed, never reused with the rest of the old answer still to come."""
    send_rest = threading.Event()

    def answer_then_hold(message: dict) -> Any:
        status, headers, event = _sse_answer(message)
        return status, headers, [event, lambda: send_rest.wait(WAIT), b": the rest of the stream\n\n"]

    calls = iter([answer_then_hold, _sse_answer])
    routes = {"initialize": json_answer(INITIALIZE), "tools/call": lambda message: next(calls)(message)}
    with MethodServer(routes) as server, http_client(server) as c:
        assert c.call_tool("echo", {"text": "ok"})["content"][0]["text"] == "ok"
        threading.Timer(0.2, send_rest.set).start()  # while the next call waits for its answer
        assert outcome_within(lambda: c.call_tool("echo", {"text": "ok"}))["content"][0]["text"] == "ok"


def test_an_abort_after_its_answer_never_cuts_the_next_call_on_the_same_connection() -> None:
    """Once a call's answer is read its connection is back in the pool: an abort arriving then
    (here from a log handler that runs while the rest of the answer is routed) must not shut it
    under the next call that took it."""
    second_arrived, hold = threading.Event(), threading.Event()
    controller = AbortController()
    outcomes: list[Any] = []

    def call(message: dict) -> Any:
        if message["params"]["arguments"]["text"] == "second":
            second_arrived.set()
            hold.wait(WAIT)
            return json_answer(text_result("second"))(message)
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": text_result("first")}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "late"}}
        return 200, {"Content-Type": "application/json"}, json.dumps([answer, note]).encode()

    class AbortAfterTheNextCallIsSent(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            second = threading.Thread(
                target=lambda: outcomes.append(outcome_within(lambda: c.call_tool("echo", {"text": "second"})))
            )
            second.start()
            assert second_arrived.wait(WAIT)
            controller.abort()
            hold.set()
            second.join(WAIT)

    handler = AbortAfterTheNextCallIsSent()
    server_log = logging.getLogger("piagent.mcp.server")
    with MethodServer({"initialize": json_answer(INITIALIZE), "tools/call": call}) as server, http_client(server) as c:
        server_log.addHandler(handler)
        level = server_log.level
        server_log.setLevel(logging.INFO)
        try:
            c.call_tool("echo", {"text": "first"}, signal=controller.signal)
        finally:
            server_log.setLevel(level)
            server_log.removeHandler(handler)
    assert len(outcomes) == 1 and not isinstance(outcomes[0], Exception), outcomes
    assert outcomes[0]["content"][0]["text"] == "second"


def test_an_http_call_is_read_on_the_calling_thread_with_no_thread_started_for_it() -> None:
    seen: list[list[str]] = []
    earlier = set(threading.enumerate())  # other tests' clients may still be ending theirs

    def call(message: dict) -> Any:  # runs in this process: the client's threads are visible
        seen.append([t.name for t in threading.enumerate() if t.name.startswith("mcp-http") and t not in earlier])
        return json_answer(text_result("ok"))(message)

    with MethodServer({"initialize": json_answer(INITIALIZE), "tools/call": call}) as server, http_client(server) as c:
        # connecting's threads end first: the GET stream's (it got its 405) and the one that posted initialized
        wait_until(lambda: not any(t.name.startswith("mcp-http") and t not in earlier for t in threading.enumerate()))
        for _ in range(3):
            c.call_tool("echo", {"text": "ok"})
    assert seen == [[], [], []]


def test_a_same_origin_307_is_followed_with_its_body() -> None:
    redirects = iter([True])

    def call(message: dict) -> Any:
        if next(redirects, False):
            return 307, {"Location": "/mcp/v2"}, b""
        return json_answer(text_result(message["params"]["arguments"]["text"]))(message)

    with MethodServer({"initialize": json_answer(INITIALIZE), "tools/call": call}) as server, http_client(server) as c:
        assert c.call_tool("echo", {"text": "sent twice"})["content"][0]["text"] == "sent twice"
        assert server.methods.count("tools/call") == 2


def _over_the_bound() -> bytes:
    from piagent.mcp._connection import MAX_MESSAGE_BYTES

    return b"x" * (MAX_MESSAGE_BYTES + 1024)


def _answer_of(text: bytes) -> bytes:
    return b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' + text + b'"}]}}'


def _json_body(message: dict) -> bytes:
    return _answer_of(_over_the_bound()) % message["id"]


def _gzip(body: bytes) -> bytes:
    import gzip

    return gzip.compress(body, compresslevel=1)


JSON = {"Content-Type": "application/json"}
SSE = {"Content-Type": "text/event-stream"}
OVERSIZED_ANSWERS = {
    "a JSON body": lambda m: (200, JSON, _json_body(m)),
    "a gzip bomb": lambda m: (200, {**JSON, "Content-Encoding": "gzip"}, _gzip(_json_body(m))),
    "a long SSE line": lambda m: (200, SSE, b"data: " + _json_body(m) + b"\n\n"),
    "SSE data never dispatched": lambda m: (
        200,
        SSE,
        (b"data: " + b"x" * 1024 + b"\n") * (len(_over_the_bound()) // 1024),
    ),
    "an SSE gzip bomb": lambda m: (200, {**SSE, "Content-Encoding": "gzip"}, _gzip(b"data: " + _json_body(m))),
}


@pytest.mark.parametrize("shape", list(OVERSIZED_ANSWERS))
def test_an_answer_over_the_message_bound_fails_the_call_at_once(shape: str) -> None:
    routes = {"initialize": json_answer(INITIALIZE), "tools/call": OVERSIZED_ANSWERS[shape]}
    with MethodServer(routes) as server, http_client(server, timeout=None) as client:
        error = outcome_within(lambda: client.call_tool("echo", {}), timeout=4 * WAIT)
        assert isinstance(error, MCPConnectionError)
        assert "larger than 67,108,864 bytes" in str(error)


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
def test_a_gzip_bomb_inflating_past_the_bound_keeps_the_clients_memory_bounded(content_type: str) -> None:
    result = run_client(
        SILENT_SERVER,
        f"""
        import resource, zlib
        from piagent.mcp import MCPConnectionError
        packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        bomb = packer.compress(b"data: ") + b"".join(packer.compress(b"x" * 2**20) for _ in range(512)) + packer.flush()
        headers = {{"Content-Type": "{content_type}", "Content-Encoding": "gzip"}}
        routes = {{"initialize": json_answer(INITIALIZE), "tools/call": lambda message: (200, headers, bomb)}}
        with MethodServer(routes) as server, MCPClient.http(server.url, protocol="2025-11-25") as client:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                client.call_tool("echo", {{}})
            except MCPConnectionError as exc:
                error = str(exc)
            grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(json.dumps({{"error": error, "grown_mib": grown_mib}}))
        """,
    )
    assert "larger than 67,108,864 bytes" in result["error"]
    assert result["grown_mib"] < 256, result  # the answer inflates to 512 MiB


def test_a_deeply_nested_http_answer_fails_the_call_instead_of_killing_its_reader() -> None:
    def nested(m: dict) -> tuple:
        return 200, JSON, _answer_of(b'", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b', "y": "') % m["id"]

    routes = {"initialize": json_answer(INITIALIZE), "tools/call": nested}
    with MethodServer(routes) as server, http_client(server, timeout=None) as client:
        error = outcome_within(lambda: client.call_tool("echo", {}))
        assert isinstance(error, MCPProtocolError)
        assert "nested too deeply" in str(error)


SILENT_SERVER = """
from piagent.mcp import MCPClient, MCPTimeoutError
sys.path.insert(0, "tests")
from support.mcp_http_server import INITIALIZE, SILENT, MethodServer, json_answer
from support.waits import wait_until

def client_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith("mcp")]
"""


def test_calls_to_a_server_that_never_answers_leave_no_thread_and_close_returns() -> None:
    result = run_client(
        SILENT_SERVER,
        """
        routes = {"initialize": json_answer(INITIALIZE), "tools/call": SILENT, "notifications/cancelled": SILENT}
        with MethodServer(routes) as server:
            client = MCPClient.http(server.url, protocol="2025-11-25")
            for _ in range(30):
                try:
                    client.call_tool("echo", {}, timeout=0.05)
                except MCPTimeoutError:
                    pass
            client.close()
            wait_until(lambda: not client_threads(), timeout=5)
            print(json.dumps({"left": client_threads()}))
        """,
        timeout=60,
    )
    assert result == {"left": []}


def test_a_call_interrupted_by_ctrl_c_leaves_no_thread_waiting_on_a_silent_server() -> None:
    result = run_client(
        SILENT_SERVER,
        """
        import os, signal
        routes = {"initialize": json_answer(INITIALIZE), "tools/call": SILENT, "notifications/cancelled": SILENT}
        with MethodServer(routes) as server:
            with MCPClient.http(server.url, protocol="2025-11-25", timeout=None) as client:
                wait_until(lambda: "mcp-http" not in client_threads(), timeout=5)  # the GET stream got its 405
                threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # a Ctrl-C
                try:
                    client.call_tool("echo", {})
                except KeyboardInterrupt:
                    pass
                wait_until(lambda: "mcp-http" not in client_threads(), timeout=5)
                print(json.dumps({"left": [name for name in client_threads() if name == "mcp-http"]}))
        """,
        timeout=60,
    )
    assert result == {"left": []}


def test_connecting_to_a_server_that_never_answers_leaves_no_thread() -> None:
    result = run_client(
        SILENT_SERVER,
        """
        routes = {"initialize": SILENT, "server/discover": SILENT, "notifications/cancelled": SILENT}
        with MethodServer(routes) as server:
            try:
                MCPClient.http(server.url, connect_timeout=0.5, discover_timeout=0.2)
            except MCPTimeoutError:
                pass
            wait_until(lambda: not client_threads(), timeout=5)
            print(json.dumps({"left": client_threads()}))
        """,
        timeout=60,
    )
    assert result == {"left": []}


def test_a_ping_flood_over_http_is_answered_on_a_bounded_number_of_threads() -> None:
    result = run_client(
        SILENT_SERVER,
        """
        from piagent.mcp._connection import ANSWER_THREADS
        from piagent.mcp._http import POST_THREADS
        seen = []

        def flood(message):
            pings = b"".join(b'data: {"jsonrpc": "2.0", "id": "p%d", "method": "ping"}\\n\\n' % n for n in range(3000))
            answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}).encode()
            return 200, {"Content-Type": "text/event-stream"}, pings + b"data: " + answer + b"\\n\\n"

        def answered(message):
            seen.append(len(client_threads()))
            return 202, {}, b""

        routes = {"initialize": json_answer(INITIALIZE), "tools/call": flood, "(response)": answered}
        with MethodServer(routes) as server:
            with MCPClient.http(server.url, protocol="2025-11-25") as client:
                client.call_tool("echo", {})
                wait_until(lambda: len(seen) >= 64, timeout=10)
            print(json.dumps({"peak": max(seen), "bound": ANSWER_THREADS + POST_THREADS + 2}))
        """,
    )
    assert result["peak"] <= result["bound"]  # + the call's exchange and the GET stream


def test_posts_dropped_in_a_flood_are_warned_about_a_few_times_not_once_each(caplog: pytest.LogCaptureFixture) -> None:
    def flood(message: dict) -> Any:
        pings = b"".join(b'data: {"jsonrpc": "2.0", "id": "p%d", "method": "ping"}\n\n' % n for n in range(3000))
        answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}).encode()
        return 200, SSE, pings + b"data: " + answer + b"\n\n"

    release = threading.Event()

    def accepted_once_released(message: dict) -> Any:
        release.wait(WAIT)  # the answers pile up meanwhile
        return 202, {}, b""

    routes = {"initialize": json_answer(INITIALIZE), "tools/call": flood, "(response)": accepted_once_released}
    logged = caplog.at_level(logging.WARNING, logger="piagent.mcp")
    with MethodServer(routes) as server, logged, http_client(server) as client:
        client.call_tool("echo", {})
        release.set()
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert 0 < len(dropped) <= 12, len(dropped)  # 1, 2, 4, ... 2,048 drops


# -- tool names ----------------------------------------------------------------------------------


def test_a_server_tool_named_like_a_built_in_tool_is_a_usage_error_naming_it(faux: Any) -> None:
    server = f"{sys.executable} {HOSTILE} read_file"
    run = run_cli(faux, "--tools", "read_file", "--mcp", server, "Read it.")
    assert run["code"] == 2
    assert "read_file" in run["err"] and "built-in" in run["err"] and "Traceback" not in run["err"]


def test_a_server_tool_named_final_answer_is_left_out_and_schema_runs_work(faux: Any, tmp_path: Any) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}))
    faux.set_responses([faux_message('{"city": "Paris"}')])
    run = run_cli(faux, "--mcp", f"{sys.executable} {HOSTILE} final_answer", "--schema", str(schema), "Where?")
    assert run["code"] == 0, run["err"]
    assert json.loads(run["out"]) == {"city": "Paris"}


@pytest.mark.parametrize("name", ["evil\x1b]52;c;aGk=\x07", "new\nline", "", "x" * 129, "with space"])
def test_a_tool_name_outside_mcps_rule_is_left_out_with_an_escaped_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="piagent.mcp"), hostile(name) as client:
        assert [tool.name for tool in client.tools()] == ["echo"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "piagent.mcp"]
    assert any(repr(name)[:40] in w for w in warnings)
    assert not any("\x1b" in w or "\x07" in w for w in warnings)


def test_a_left_out_tool_is_reported_on_the_commands_stderr_without_v(tmp_path: Any) -> None:
    from tests.ai.providers.openai_wire import chat_text
    from tests.support.scripted_server import ScriptedServer

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}
    env.update(HOME=str(tmp_path), PIAGENT_SESSIONS_DIR=str(tmp_path / "sessions"))
    with ScriptedServer() as server:
        server.reply(chat_text("Hello."))
        process = subprocess.run(
            [sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "-m", "m1"]
            + ["--mcp", f"{sys.executable} {HOSTILE} final_answer", "Hi"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=WAIT,
        )
    assert process.returncode == 0 and process.stdout == "Hello.\n", process.stderr
    assert "piagent: MCP tool 'final_answer' left out: structured output uses that name" in process.stderr


def test_a_tool_name_a_server_lists_twice_is_kept_once_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="piagent.mcp"), hostile("echo", "other", "other") as client:
        assert [tool.name for tool in client.tools()] == ["echo", "other"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "piagent.mcp"]
    assert any("'echo'" in w and "listed that name more than once" in w for w in warnings)
    assert any("'other'" in w and "listed that name more than once" in w for w in warnings)


# -- connecting ----------------------------------------------------------------------------------


def test_auto_against_a_silent_server_is_bounded_by_connect_timeout_in_all() -> None:
    silent = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]
    with pytest.raises(MCPTimeoutError) as raised:
        MCPClient.stdio(silent[0], silent[1:], connect_timeout=1.0, discover_timeout=0.6)
    waited = re.search(r"initialize: no answer within ([\d.]+) s", str(raised.value))
    assert waited is not None and float(waited.group(1)) <= 0.4  # what the probe left of connect_timeout


def test_a_huge_retry_interval_leaves_no_thread_once_its_call_timed_out() -> None:
    result = run_client(
        SILENT_SERVER,
        """
        from piagent.mcp import MCPTimeoutError
        cut_short = lambda m: (200, {"Content-Type": "text/event-stream"}, b"id: 1\\nretry: 999999999\\ndata: \\n\\n")
        with MethodServer({"initialize": json_answer(INITIALIZE), "tools/call": cut_short}) as server:
            with MCPClient.http(server.url, protocol="2025-11-25") as client:
                try:
                    client.call_tool("echo", {}, timeout=0.2)
                except MCPTimeoutError:
                    pass
                wait_until(lambda: not client_threads(), timeout=5)
                print(json.dumps({"left": client_threads()}))
        """,
    )
    assert result == {"left": []}


def test_the_servers_retry_interval_holds_for_later_resumptions_that_do_not_repeat_it() -> None:
    from piagent.mcp._http import DEFAULT_RETRY_MS, MAX_RESUMES

    quick = b"id: 1\nretry: 10\ndata: \n\n"  # resume after 10 ms, then end without answering
    routes = {
        "initialize": json_answer(INITIALIZE),
        "tools/call": lambda m: (200, SSE, quick),
        "GET": lambda m: (200, SSE, b"id: 2\ndata: \n\n"),  # no retry: 10 ms still holds
    }
    with MethodServer(routes) as server, http_client(server) as client:
        error = outcome_within(lambda: client.call_tool("echo", {}, timeout=0.9 * DEFAULT_RETRY_MS / 1000))
    assert isinstance(error, MCPConnectionError), error  # not a timeout waiting out the default retry
    assert f"broke {MAX_RESUMES + 1} times" in str(error)
