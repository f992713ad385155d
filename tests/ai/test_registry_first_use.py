"""The built-in providers load once, on first use, even when many threads arrive together."""

from __future__ import annotations

import subprocess
import sys
import textwrap

WAIT = 60

# In a fresh interpreter (the providers are already loaded in this one): eight threads
# released together all ask for a provider while the first of them is still importing.
SCRIPT = textwrap.dedent(
    """
    import threading
    from piagent.ai.registry import get_api_provider

    barrier = threading.Barrier(8)
    errors = []

    def look_up():
        barrier.wait(30)
        try:
            get_api_provider("openai-completions")
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=look_up) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    print(errors)
    """
)


def test_threads_looking_up_a_provider_during_the_first_import_all_find_it() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
