"""examples/notebook.ipynb runs under a real Jupyter kernel (nbclient + ipykernel).

The kernel is this interpreter, declared in a temporary kernelspec, so the notebook imports
the piagent under test whatever kernels the machine has installed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
KERNEL = "piagent-test"
CELL_TIMEOUT = 60


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    jupyter_path = tmp_path_factory.mktemp("jupyter")
    spec = jupyter_path / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(jupyter_path)
    try:
        notebook = nbformat.read(str(NOTEBOOK), as_version=4)
        client = NotebookClient(
            notebook, kernel_name=KERNEL, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(jupyter_path)}}
        )
        client.execute()
    finally:
        if previous is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = previous
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def streamed(cell: Any) -> list[str]:
    return [out.text for out in cell.outputs if out.output_type == "stream" and out.name == "stdout"]


def result_data(cell: Any) -> dict[str, str]:
    (result,) = [out for out in cell.outputs if out.output_type == "execute_result"]
    return dict(result.data)


def test_no_cell_fails(executed: list[Any]) -> None:
    assert not [out for cell in executed for out in cell.outputs if out.output_type == "error"]


def test_the_agent_runs_in_a_cell_while_an_event_loop_is_running(executed: list[Any]) -> None:
    assert "An asyncio event loop is running in this cell" in "".join(streamed(executed[0]))


def test_the_answer_streams_into_the_cell_in_pieces_with_the_tool_call_between(executed: list[Any]) -> None:
    pieces = streamed(executed[1])
    assert len(pieces) > 2  # several stream messages: printed as the deltas arrived
    text = "".join(pieces)
    assert text.index("Let me check the weather.") < text.index("→ get_weather({'city': 'Paris'})")
    assert text.index("← Paris: sunny, 24 °C") < text.index("It is sunny in Paris today")


def test_the_run_result_renders_as_html_with_every_message(executed: list[Any]) -> None:
    data = result_data(executed[1])
    assert data["text/plain"].startswith("RunResult(stop_reason='stop', text='It is sunny in Paris today")
    html = data["text/html"]
    assert html.startswith('<div class="piagent-run">') and html.count('class="piagent-message"') == 4
    assert "get_weather" in html and "It is sunny in Paris today" in html


def test_a_message_renders_on_its_own(executed: list[Any]) -> None:
    data = result_data(executed[2])
    assert "<b>assistant <small>(faux-1, stop)</small></b>" in data["text/html"]
    assert "It is sunny in Paris today" in data["text/html"]
