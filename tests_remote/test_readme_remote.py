"""The README's piagent.remote snippet runs as written (against a real redis-server).

It is a ```py block (``make test`` runs the ```python blocks, without Redis): the worker part
runs on a thread with a faux agent whose tool needs approval, the client part here.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from piagent import Agent, tool
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

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

    def script(context: Any, *_: Any) -> Any:
        if not any(m.role == "assistant" for m in context.messages):
            return faux_message([faux_tool_call("delete_file", {"path": "report.tmp"})])
        return faux_message("Summary: done")

    faux = register_faux_provider()
    faux.set_responses([script] * 4)
    namespace: dict[str, Any] = {"agent": Agent(model=faux.get_model(), tools=[delete_file])}
    imports = worker_code.split("\n\n")[0]
    exec(imports, namespace)
    namespace["RunHandle"](redis_server.url, "conversation-42").follow_up("first")  # so the worker has a run
    worker = threading.Thread(target=exec, args=(worker_code, namespace))
    worker.start()
    try:
        exec(client_code, namespace)
    finally:
        worker.join(30)
        faux.unregister()
    assert not worker.is_alive()
    assert deleted == ["report.tmp"]  # approved from the client part
    assert namespace["agent"].state.messages[-1].content[0].text == "Summary: done"
