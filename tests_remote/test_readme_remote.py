"""The README's piagent.remote snippet runs as written (against a real redis-server).

It is a ```py block (``make test`` runs the ```python blocks, without Redis): the worker part
runs on a thread with a faux agent whose tool needs approval, the client part here.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import redis

from piagent import Agent, tool
from piagent.testing import faux_message, faux_tool_call, register_faux_provider
from tests.support.waits import wait_until

from .redis_server import RedisServer

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_remote_snippet_runs_its_worker_and_client_parts(redis_server: RedisServer) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Across processes") :]
    block = re.search(r"^```py\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    assert block is not None
    code = block.group(1).replace("redis://localhost:6379/0", redis_server.url)
    worker_code, client_code = code.split("# any other process")
    deleted = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    def script(context: Any, *_: Any) -> Any:  # each message asks to delete, then sums up
        if context.messages[-1].role == "user":
            return faux_message([faux_tool_call("delete_file", {"path": "report.tmp"})])
        return faux_message("Summary: done")

    faux = register_faux_provider()
    faux.set_responses([script] * 8)
    namespace: dict[str, Any] = {"agent": Agent(model=faux.get_model(), tools=[delete_file])}
    imports = worker_code.split("\n\n")[0]
    exec(imports, namespace)
    handle = namespace["RunHandle"](redis_server.url, "conversation-42")
    queued = redis.Redis.from_url(redis_server.url)
    try:
        handle.follow_up("first")  # so the worker has a run
        worker = threading.Thread(target=exec, args=(worker_code, namespace))
        worker.start()
        exec(client_code, namespace)
        worker.join(30)
        assert not worker.is_alive()
        asked = [m for m in namespace["agent"].state.messages if m.role == "user"]  # "first", and the client's
        assert deleted == ["report.tmp"] * len(asked)  # each approved from the client part
        assert namespace["agent"].state.messages[-1].content[0].text == "Summary: done"

        # the conversation's next message, the worker started once it is queued: the client
        # follows only that run (from the oldest event it read the first run's approval request
        # and agent_end, and left the new run waiting for an approval)
        client = threading.Thread(target=exec, args=(client_code, namespace))
        client.start()
        assert wait_until(lambda: queued.xlen(handle.keys.control) > 0)
        worker = threading.Thread(target=exec, args=(worker_code, namespace))
        worker.start()
        client.join(30)
        worker.join(30)
        assert not client.is_alive() and not worker.is_alive()
    finally:
        faux.unregister()
    assert [m.role for m in namespace["agent"].state.messages].count("user") == len(asked) + 1
    assert deleted == ["report.tmp"] * (len(asked) + 1)
    assert namespace["agent"].state.messages[-1].content[0].text == "Summary: done"
