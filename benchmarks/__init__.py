"""``make bench``: piagent's own overhead, measured against a bare Python loop on the same bytes.

* :mod:`benchmarks.wire` builds the scripted answers (OpenAI chat-completions streaming);
* :mod:`benchmarks.server` serves them from a separate process on 127.0.0.1;
* :mod:`benchmarks.floor` is the bare ``requests`` + ``json.loads`` loop piagent is compared with;
* :mod:`benchmarks.scenarios` runs stream, args, turns, parallel, fan-out and import time;
* :mod:`benchmarks.measure` holds the timers and renders the table.
"""
