"""Redis restarted (its data lost) in the middle of a run in a worker process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from piagent.remote import RunHandle

from .processes import ROOT
from .redis_server import RedisServer

TIMEOUT = 60.0


def test_a_redis_restart_mid_run_ends_the_run_with_a_clear_error_and_the_next_run_works(
    redis_server: RedisServer,
) -> None:
    run_id = "abort-restart"
    RunHandle(redis_server.url, run_id).follow_up("first")
    env = dict(os.environ, PIAGENT_TEST_REDIS_URL=redis_server.url)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests_remote.worker_process", run_id],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert worker.stdin is not None and worker.stdout is not None
        for event in RunHandle(redis_server.url, run_id).events(timeout=TIMEOUT):
            if event["type"] == "tool_execution_start":
                break  # the run waits in its slow tool: restart Redis under it
        redis_server.restart()

        first = json.loads(worker.stdout.readline())
        assert first["stopReason"] in ("error", "aborted")
        assert f"run {run_id!r}: lost Redis" in first["errorMessage"]
        roles = [(m["role"], m.get("stopReason")) for m in first["transcript"]]
        # every message that had ended (the tool was still running), then the failure itself
        assert roles == [("user", None), ("assistant", "toolUse"), ("assistant", first["stopReason"])]

        RunHandle(redis_server.url, run_id).follow_up("second")  # Redis is back (empty)
        worker.stdin.write("again\n")
        worker.stdin.flush()
        second = json.loads(worker.stdout.readline())
        assert (second["stopReason"], second["errorMessage"], second["text"]) == ("stop", None, "after slow")
        assert second["transcript"][: len(first["transcript"])] == first["transcript"]
        worker.stdin.close()
        assert worker.wait(TIMEOUT) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
