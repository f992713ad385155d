"""piagent's user-level directory (docs/models.md#user-level-files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_dir"]


def user_dir() -> Path:
    """``$PIAGENT_HOME``, else ``~/.piagent`` (not created here)."""
    return Path(os.environ.get("PIAGENT_HOME") or Path.home() / ".piagent")
