"""What models were seen to refuse, kept across processes when asked (docs/providers.md#rejected-fields).

The lessons themselves live in :mod:`piagent.ai.capabilities` (:func:`~piagent.ai.capabilities.learn`);
this module reads and writes them in ``learned-rules.json`` of the user-level directory.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from ._home import read_user_file, user_dir
from .capabilities import learn, learned

__all__ = ["LEARNED_RULES_FILE", "remember_rejections", "save_lessons"]

logger = logging.getLogger("piagent")

#: The user-level file of learned rules, under :func:`~piagent.ai._home.user_dir`.
LEARNED_RULES_FILE = "learned-rules.json"


_remembering = threading.Event()
_file_lock = threading.Lock()


def _rules_file() -> Path:
    return user_dir() / LEARNED_RULES_FILE


def remember_rejections(enabled: bool = True) -> Path:
    """Keep what models were seen to refuse across processes, in ``$PIAGENT_HOME/learned-rules.json``
    (default ``~/.piagent``): its lessons are learned now, and new ones are added to it. Returns
    the file's path. An unreadable file is ignored with a warning (and rewritten on the next
    lesson); ``enabled=False`` stops adding to it."""
    path = _rules_file()
    if not enabled:
        _remembering.clear()
        return path
    for key, changes in _read(path).items():
        provider, _, model_id = key.partition(":")
        try:
            learn(provider, model_id, changes)
        except (TypeError, ValueError) as exc:  # a field unknown or of the wrong type
            logger.warning("%s: ignored the rules of %s (%s)", path, key, exc)
    _remembering.set()
    return path


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = read_user_file(path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("%s could not be read (%s): starting from no learned rules", path, exc)
        return {}
    rules = data.get("models") if isinstance(data, dict) else None
    return {k: v for k, v in rules.items() if isinstance(v, dict)} if isinstance(rules, dict) else {}


def save_lessons(provider: str, model_id: str) -> Optional[Path]:
    """When remembering (:func:`remember_rejections`), write the model's lessons into the file
    (atomically) and return its path; else, or if writing failed (a warning), None."""
    if not _remembering.is_set():
        return None
    path = _rules_file()
    with _file_lock:
        rules = _read(path)
        rules[f"{provider}:{model_id}"] = _as_json(learned().get((provider, model_id), {}))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".tmp")
            partial.write_text(
                json.dumps({"format": 1, "models": rules}, indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )
            os.replace(partial, path)
        except OSError as exc:
            logger.warning("could not save the learned rules in %s: %s", path, exc)
            return None
    return path


def _as_json(changes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
