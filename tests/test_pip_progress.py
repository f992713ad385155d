"""The first ``make demo`` compiles llama.cpp for minutes: it says so before it starts and
shows what pip is doing while it works (scripts/pip_progress.py), tested with a stand-in for pip
that stays in its compile step until the test lets it finish."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pip_progress.py"
sys.path.insert(0, str(SCRIPT.parent))

import pip_progress  # noqa: E402 -- importable once scripts/ is on the path

WAIT = 60

COMPILING_PIP = """
import sys
print("Collecting llama-cpp-python", flush=True)
print("[45/212] Building C object vendor/llama.cpp/ggml/src/ggml.c.o", flush=True)
sys.stdin.readline()  # the test lets it finish
print("Successfully installed llama-cpp-python-0.3.16", flush=True)
"""


def start(tmp_path: Path, pip_code: str) -> subprocess.Popen[str]:
    command = [sys.executable, str(SCRIPT), "--every", "0.05", str(tmp_path / "pip.log")]
    return subprocess.Popen(
        [*command, "--", sys.executable, "-c", pip_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_a_long_install_says_every_few_seconds_which_compile_step_it_is_at(tmp_path: Path) -> None:
    process = start(tmp_path, COMPILING_PIP)
    assert process.stdin is not None and process.stdout is not None
    line = process.stdout.readline()
    while "compiling" not in line:  # pip is still collecting; the step comes with a later line
        assert line, "the progress lines stopped before the compile step"
        line = process.stdout.readline()
    assert line.strip().endswith("compiling: step 45 of 212")
    assert line.strip().split()[0].endswith("s")  # the time it has run, e.g. 0m00s
    process.stdin.write("\n")
    process.stdin.close()
    process.stdout.read()
    assert process.wait(WAIT) == 0
    log = (tmp_path / "pip.log").read_text()
    assert log.splitlines()[-1] == "Successfully installed llama-cpp-python-0.3.16"


def test_makes_percent_lines_are_progress_too() -> None:
    progress = pip_progress.Progress()
    progress.feed("[ 45%] Building C object ggml.c.o\n")
    assert progress.describe() == "compiling: 45%"
    progress.feed("Installing collected packages: llama-cpp-python\n")
    assert progress.describe() == "Installing collected packages: llama-cpp-python"


def test_a_failed_install_shows_the_end_of_pips_output_and_its_status(tmp_path: Path) -> None:
    process = start(tmp_path, "import sys; print('ERROR: Failed building wheel for llama-cpp-python'); sys.exit(3)")
    output, _ = process.communicate(timeout=WAIT)
    assert process.returncode == 3
    assert "(exit status 3)" in output and "ERROR: Failed building wheel for llama-cpp-python" in output


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_says_how_long_the_first_install_takes_before_it_starts(tmp_path: Path) -> None:
    dry = subprocess.run(
        ["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, timeout=WAIT
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    said = next(i for i, line in enumerate(lines) if "compiles llama.cpp from source" in line)
    install = next(i for i, line in enumerate(lines) if "scripts/pip_progress.py" in line and "[local]" in line)
    assert said < install and "about 10 to 15 minutes" in lines[said]
