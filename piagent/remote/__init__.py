"""piagent across processes: agents in workers (e.g. Celery), driven and watched through Redis.

    handle = RunHandle("redis://localhost:6379/0", "conversation-42")   # any process
    handle.steer("Use metric units")
    for event in handle.events(timeout=30): ...

    with attach(agent, "redis://localhost:6379/0", "conversation-42"):  # the worker
        run_pending(agent)

Needs the ``redis`` extra (``pip install -e '.[redis]'`` from the checkout); ``import piagent`` never imports
this package. The contract (keys, delivery guarantees, crash recovery) is docs/remote.md.
"""

from __future__ import annotations

try:
    import redis  # noqa: F401 -- the extra's dependency: imported first, for a clear error without it
except ModuleNotFoundError as exc:
    from .._extras import missing_extra

    raise missing_extra(exc, "piagent.remote", "redis") from exc

from .approval import Approval
from .errors import RemoteError, RunBusyError
from .handle import RunHandle
from .worker import Attachment, attach, run_pending

__all__ = ["Approval", "Attachment", "RemoteError", "RunBusyError", "RunHandle", "attach", "run_pending"]
