"""The ``piagent`` command (console script ``piagent``, or ``python -m piagent``).

A package rather than one module so each part stays readable: :mod:`.app` (options, one-shot
runs), :mod:`.config` (model and tools), :mod:`.render` (what is printed where) and
:mod:`.interactive` (the session that reads lines while the agent works).
"""

from __future__ import annotations

from .app import main

__all__ = ["main"]
