"""The exceptions of :mod:`piagent.remote`, under piagent's base error.

PiAgentError
└── RemoteError                  Redis unreachable, or it lost the run's state (a restart)
    └── RunBusyError             another live worker holds the run (attach timed out)
"""

from __future__ import annotations

from ..exceptions import PiAgentError

__all__ = ["RemoteError", "RunBusyError"]


class RemoteError(PiAgentError):
    """Redis could not be reached, or it lost the run's state; the message says which run."""


class RunBusyError(RemoteError):
    """Another live worker is attached to this run id (its lease kept being renewed)."""
