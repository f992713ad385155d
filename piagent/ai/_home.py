"""piagent's user-level directory (docs/models.md#user-level-files)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._files import read_regular
from .nesting import MAX_RECORD_DEPTH, loads

__all__ = ["MAX_USER_FILE_BYTES", "read_user_file", "user_dir"]

MAX_USER_FILE_BYTES = 16 * 1024 * 1024
"""The most piagent reads of a user-level file (the catalogue, the learned rules)."""


def user_dir() -> Path:
    """``$PIAGENT_HOME``, else ``~/.piagent`` (not created here)."""
    return Path(os.environ.get("PIAGENT_HOME") or Path.home() / ".piagent")


def read_user_file(path: Path) -> Any:
    """The JSON of the user-level file ``path``: a regular file (a FIFO or a device is refused,
    never waited on) of at most :data:`MAX_USER_FILE_BYTES`, nested at most ``MAX_RECORD_DEPTH``
    levels. FileNotFoundError when absent; OSError or ValueError (InvalidValueError) otherwise."""
    return loads(read_regular(str(path), MAX_USER_FILE_BYTES), str(path), MAX_RECORD_DEPTH)
