"""A real ``redis-server`` on a free 127.0.0.1 port, without persistence, for the remote tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional

import redis

START_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``start()``/``stop()``/``restart()`` one server process on a fixed port (its data is lost on stop)."""

    def __init__(self) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server)")
        self.executable = executable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = tempfile.mkdtemp(prefix="piagent-redis-")
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.directory,
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.01)
        client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def key_ttls(client: redis.Redis, run_id: str) -> dict[str, int]:
    """The TTL in ms (-1: none) of each of the run's keys, by name (``control``, ``approved:<id>``...)."""
    prefix = f"piagent:{{{run_id}}}:"
    return {str(key)[len(prefix) :]: int(client.pttl(key)) for key in client.scan_iter(f"{prefix}*")}


def without_ttl(client: redis.Redis, run_id: str) -> list[str]:
    """The names of the run's keys that never expire."""
    return sorted(name for name, ttl in key_ttls(client, run_id).items() if ttl == -1)
