"""The rules of piagent.remote, each against a real redis-server (agents in this process)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import redis

from piagent import Agent
from piagent.remote import RemoteError, RunBusyError, RunHandle, attach, run_pending
from piagent.remote._keys import stream_id
from piagent.testing import faux_message, register_faux_provider
from tests.support.waits import wait_until

from .redis_server import RedisServer


def user_texts(agent: Agent) -> list[str]:
    return [m.content[0].text for m in agent.state.messages if m.role == "user"]


def test_a_message_sent_while_no_worker_is_attached_waits_for_the_next_one(
    redis_server: RedisServer, faux: Any
) -> None:
    handle = RunHandle(redis_server.url, "rules-wait")
    handle.follow_up("hello")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, "rules-wait"):
        result = run_pending(agent)
    assert result is not None and user_texts(agent) == ["hello"]
    with attach(agent, redis_server.url, "rules-wait"):
        assert run_pending(agent) is None  # delivered once: nothing left


def test_steering_mode_all_delivers_every_message_sent_before_the_poll_together(
    redis_server: RedisServer, faux: Any
) -> None:
    handle = RunHandle(redis_server.url, "rules-all")
    for text in ("a", "b", "c"):
        handle.steer(text)
    agent = Agent(model=faux.get_model(), steering_mode="all")
    with attach(agent, redis_server.url, "rules-all"):
        run_pending(agent)
    assert [m.role for m in agent.state.messages] == ["user", "user", "user", "assistant"]
    assert user_texts(agent) == ["a", "b", "c"]


def test_messages_read_but_not_delivered_go_back_to_redis_on_detach_and_come_once_to_the_next_attachment(
    redis_server: RedisServer, faux: Any
) -> None:
    handle = RunHandle(redis_server.url, "rules-detach")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, "rules-detach"):
        handle.steer("later")
        assert wait_until(agent.has_queued_messages)  # the reader thread has put it in the agent's queue
    assert not agent.has_queued_messages()  # detaching took it out of the agent's queue
    with attach(agent, redis_server.url, "rules-detach"):
        agent.follow_up("local")  # a message of the process itself is kept as it is
        run_pending(agent)
    assert user_texts(agent) == ["later", "local"]


def test_a_second_worker_cannot_attach_while_the_first_holds_the_run(redis_server: RedisServer, faux: Any) -> None:
    first = attach(Agent(model=faux.get_model()), redis_server.url, "rules-busy")
    try:
        with pytest.raises(RunBusyError, match="rules-busy"):
            attach(Agent(model=faux.get_model()), redis_server.url, "rules-busy", claim_timeout=0.2)
    finally:
        first.close()
    attach(Agent(model=faux.get_model()), redis_server.url, "rules-busy", claim_timeout=0.2).close()


def test_abort_without_an_attached_worker_is_not_kept_for_the_next_run(redis_server: RedisServer, faux: Any) -> None:
    handle = RunHandle(redis_server.url, "rules-abort")
    assert handle.abort() is False
    handle.follow_up("go")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, "rules-abort"):
        result = run_pending(agent)
    assert result is not None and result.stop_reason == "stop"


def test_events_resume_after_a_given_event_id_and_end_after_the_idle_timeout(
    redis_server: RedisServer, faux: Any
) -> None:
    handle = RunHandle(redis_server.url, "rules-events")
    handle.follow_up("go")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, "rules-events"):
        run_pending(agent)
    everything = list(handle.events(timeout=0.2))
    assert everything[0]["type"] == "agent_start" and everything[-1]["type"] == "agent_end"
    middle = everything[3]["eventId"]
    assert list(handle.events(since=middle, timeout=0.2)) == everything[4:]
    with pytest.raises(ValueError):
        list(handle.events(since="not-an-id", timeout=0.2))


def test_decisions_on_calls_that_are_not_pending_change_nothing(redis_server: RedisServer) -> None:
    handle = RunHandle(redis_server.url, "rules-decide")
    assert handle.approve("call_unknown") is False
    assert handle.deny("call_unknown", "no") is False
    assert handle.pending_approvals() == {}
    with pytest.raises(ValueError):
        handle.approve("")


def test_bad_arguments_are_clear_errors(redis_server: RedisServer) -> None:
    for run_id in ("", "a{b}", "x" * 201, 42):
        with pytest.raises(ValueError):
            RunHandle(redis_server.url, run_id)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decode_responses"):
        RunHandle(redis.Redis.from_url(redis_server.url), "ok")
    with pytest.raises(TypeError):
        RunHandle(redis_server.url, "ok").steer(["not", "text"])  # type: ignore[arg-type]


def test_an_unreachable_redis_raises_remote_error_naming_the_run_and_operation() -> None:
    from .redis_server import free_port

    handle = RunHandle(f"redis://127.0.0.1:{free_port()}/0", "rules-down")
    with pytest.raises(RemoteError, match=r"steer\(\) on run 'rules-down' failed: ConnectionError"):
        handle.steer("hello")


def test_abort_from_a_handle_stops_an_attached_run_at_once(redis_server: RedisServer) -> None:
    provider = register_faux_provider(tokens_per_second=50.0)
    provider.set_responses([faux_message("word " * 500)])  # ~10 s of paced streaming
    agent = Agent(model=provider.get_model())
    handle = RunHandle(redis_server.url, "rules-stop")
    handle.follow_up("go")
    streaming = threading.Event()
    agent.subscribe(lambda event: event.type == "message_update" and streaming.set())
    try:
        with attach(agent, redis_server.url, "rules-stop"):
            runner = threading.Thread(target=run_pending, args=(agent,))
            runner.start()
            assert streaming.wait(10)
            assert handle.abort("enough") is True
            runner.join(10)
            assert not runner.is_alive()
    finally:
        provider.unregister()
    assert agent.state.messages[-1].stop_reason == "aborted"


def test_an_agent_factory_is_called_only_once_the_runs_lease_is_held(redis_server: RedisServer, faux: Any) -> None:
    built: list[str] = []

    def build(run_id: str) -> Agent:
        built.append(run_id)
        return Agent(model=faux.get_model())

    with attach(build, redis_server.url, "rules-factory") as holder:
        assert built == ["rules-factory"] and isinstance(holder.agent, Agent)
        with pytest.raises(RunBusyError):
            attach(build, redis_server.url, "rules-factory", claim_timeout=0.2)
        assert built == ["rules-factory"]  # the second worker never built (loaded) the agent


def test_handles_and_attachments_given_one_url_share_its_connections_run_after_run(
    redis_server: RedisServer, faux: Any
) -> None:
    server = redis.Redis.from_url(redis_server.url, decode_responses=True)

    def one_run(number: int) -> None:
        handle = RunHandle(redis_server.url, f"rules-pool-{number}")
        handle.follow_up("hello")
        agent = Agent(model=faux.get_model())
        with attach(agent, redis_server.url, f"rules-pool-{number}"):
            run_pending(agent)
        assert any(event["type"] == "agent_end" for event in handle.events(timeout=5))
        handle.close()

    one_run(0)  # fills the URL's pool
    opened = server.info("stats")["total_connections_received"]
    for number in range(1, 4):
        one_run(number)
    assert server.info("stats")["total_connections_received"] == opened  # no connection opened since
    server.close()


def test_an_agent_factory_that_fails_loses_no_message_and_older_pending_messages_come_first(
    redis_server: RedisServer, faux: Any
) -> None:
    handle = RunHandle(redis_server.url, "rules-factory-fails")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, "rules-factory-fails"):
        handle.follow_up("first")
        assert wait_until(agent.has_queued_messages)  # read, never delivered: pending once detached
    handle.follow_up("second")  # never read: the failed attach's claim reads it

    def broken(run_id: str) -> Agent:
        raise RuntimeError("the session would not load")

    with pytest.raises(RuntimeError, match="would not load"):
        attach(broken, redis_server.url, "rules-factory-fails")
    handle.follow_up("third")
    with attach(agent, redis_server.url, "rules-factory-fails"):
        run_pending(agent)
    assert user_texts(agent) == ["first", "second", "third"]


def test_the_events_stream_keeps_about_max_events_events_and_expires_a_day_after_its_last_event(
    redis_server: RedisServer,
) -> None:
    provider = register_faux_provider(chunk_tokens=(1, 1), tokens_per_second=2000.0)  # many small batches
    provider.set_responses([faux_message("word " * 600)])
    agent = Agent(model=provider.get_model())
    handle = RunHandle(redis_server.url, "rules-cap")
    handle.follow_up("go")
    try:
        with attach(agent, redis_server.url, "rules-cap", max_events=100):
            run_pending(agent)
    finally:
        provider.unregister()
    server = redis.Redis.from_url(redis_server.url, decode_responses=True)
    events = "piagent:{rules-cap}:events"
    newest_batch = len(server.xrevrange(events, count=1)[0][1]["events"].split("\n"))
    kept = list(handle.events(timeout=0.2))
    # MINID ~ trims whole nodes (at most 100 entries or 4 kB), never the newest entry
    assert 100 <= len(kept) <= max(100, newest_batch) + 200 and kept[-1]["type"] == "agent_end"
    assert 23 * 3600 * 1000 < server.pttl(events) <= 24 * 3600 * 1000
    ids = [stream_id(e["eventId"]) for e in kept]
    assert ids == sorted(set(ids))  # oldest first, one id each
    server.close()


def test_a_live_worker_keeps_its_lease_after_a_slow_agent_factory(redis_server: RedisServer, faux: Any) -> None:
    """The first renewal counts from the claim, not from the end of the agent's loading."""
    loading = threading.Event()

    def slow(run_id: str) -> Agent:
        loading.wait(1.0)  # a session that takes two thirds of the lease to load
        return Agent(model=faux.get_model())

    first = attach(slow, redis_server.url, "rules-slow-factory", lease=1.5)
    try:
        with pytest.raises(RunBusyError):  # the lease outlives a wait of twice its length
            attach(Agent(model=faux.get_model()), redis_server.url, "rules-slow-factory", claim_timeout=3)
    finally:
        first.close()


def test_a_live_worker_keeps_its_lease_while_control_entries_arrive_just_under_a_second_apart(
    redis_server: RedisServer, faux: Any
) -> None:
    """A read that returns early still renews on time: the reader never blocks past a renewal."""
    handle = RunHandle(redis_server.url, "rules-steady-steers")
    agent = Agent(model=faux.get_model())
    stop = threading.Event()

    def steer_steadily() -> None:
        while not stop.wait(0.9):
            handle.steer("still there?")

    first = attach(agent, redis_server.url, "rules-steady-steers", lease=1.5)
    sender = threading.Thread(target=steer_steadily)
    sender.start()
    try:
        with pytest.raises(RunBusyError):
            attach(Agent(model=faux.get_model()), redis_server.url, "rules-steady-steers", claim_timeout=4)
    finally:
        stop.set()
        sender.join()
        first.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
def test_a_forked_child_uses_the_urls_client_on_connections_of_its_own(redis_server: RedisServer, faux: Any) -> None:
    """The shared client's pool starts afresh in a forked child (a Celery prefork worker), and the
    child leaves the parent's connections as they were."""
    handle = RunHandle(redis_server.url, "rules-fork")
    handle.follow_up("from the parent")  # the parent's pool now holds a connection
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status only
        code = 1
        try:
            RunHandle(redis_server.url, "rules-fork").follow_up("from the child")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    handle.follow_up("from the parent again")  # on the parent's own connection, untouched
    agent = Agent(model=faux.get_model(), steering_mode="all", follow_up_mode="all")
    with attach(agent, redis_server.url, "rules-fork"):
        run_pending(agent)
    assert user_texts(agent) == ["from the parent", "from the child", "from the parent again"]


def test_handles_built_at_once_from_many_threads_share_the_urls_one_client(redis_server: RedisServer) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/7"  # a URL no other test uses: its client is built in the race
    start = threading.Barrier(8)
    handles: list[RunHandle] = []

    def build() -> None:
        start.wait()
        handles.append(RunHandle(url, "rules-race"))

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(handle._redis) for handle in handles}) == 1
    assert all(handle.follow_up("hello") for handle in handles)


def test_a_live_worker_keeps_a_lease_shorter_than_a_second(redis_server: RedisServer, faux: Any) -> None:
    first = attach(Agent(model=faux.get_model()), redis_server.url, "rules-short-lease", lease=0.6)
    try:
        with pytest.raises(RunBusyError):  # renewed within its 0.6 s, again and again
            attach(Agent(model=faux.get_model()), redis_server.url, "rules-short-lease", claim_timeout=1.5)
    finally:
        first.close()
