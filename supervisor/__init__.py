"""sandvisor's host side, in rooms (docs/architecture.md): ``commands`` (the sandvisor
command) over ``hosting`` (asyncio, sync) and ``cluster`` (Ray), over the two wings
``scripted`` (the shell) and ``workers`` (the `Supervisor`), both over ``tools`` (the tool
surface), with ``ledger`` below.

Public names are imported lazily so that ``import supervisor.scripted`` does not pay for
the worker supervisor, and the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "Supervisor": "supervisor.workers.supervisor",
    "SupervisorConfig": "supervisor.workers.config",
    "SupervisorError": "supervisor.workers.supervisor",
    "DuplicateOperation": "supervisor.workers.supervisor",
    "JournalError": "supervisor.workers.worker_journal",
    "JournalFull": "supervisor.workers.supervisor",
    "JournalTampered": "supervisor.workers.worker_journal",
    "CallHandle": "supervisor.workers.calls",
    "Outcome": "supervisor.workers.outcome",
    "CallEvent": "supervisor.workers.call_audit",
    "AuditStream": "supervisor.workers.call_audit",
    "WorkerUnavailable": "supervisor.workers.pool",
    "ToolGroup": "supervisor.workers.groups",
    "Secret": "supervisor.workers.secrets",
    "AsyncioSupervisor": "supervisor.hosting.asyncio_host",
    "SyncSupervisor": "supervisor.hosting.sync_host",
}

__all__ = [
    "AsyncioSupervisor",
    "AuditStream",
    "CallEvent",
    "CallHandle",
    "DuplicateOperation",
    "JournalError",
    "JournalFull",
    "JournalTampered",
    "Outcome",
    "Secret",
    "Supervisor",
    "SupervisorConfig",
    "SupervisorError",
    "SyncSupervisor",
    "ToolGroup",
    "WorkerUnavailable",
]
assert sorted(__all__) == sorted(_LAZY)

if TYPE_CHECKING:
    from supervisor.hosting.asyncio_host import AsyncioSupervisor
    from supervisor.hosting.sync_host import SyncSupervisor
    from supervisor.workers.call_audit import AuditStream, CallEvent
    from supervisor.workers.calls import CallHandle
    from supervisor.workers.config import SupervisorConfig
    from supervisor.workers.groups import ToolGroup
    from supervisor.workers.outcome import Outcome
    from supervisor.workers.pool import WorkerUnavailable
    from supervisor.workers.secrets import Secret
    from supervisor.workers.supervisor import (
        DuplicateOperation,
        JournalFull,
        Supervisor,
        SupervisorError,
    )
    from supervisor.workers.worker_journal import JournalError, JournalTampered


__getattr__ = lazy_exports(__name__, _LAZY)
