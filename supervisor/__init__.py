"""sandvisor's host side: supervisor, ledger, tool registry, scripted orchestration, CLI.

Public names are imported lazily so that ``import supervisor.scripted`` does not pay for
the worker supervisor, and the reverse.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY: dict[str, str] = {
    "Supervisor": "supervisor.supervisor",
    "SupervisorError": "supervisor.supervisor",
    "DuplicateOperation": "supervisor.supervisor",
    "CallHandle": "supervisor.calls",
    "Outcome": "supervisor.outcome",
    "CallEvent": "supervisor.audit",
    "AuditStream": "supervisor.audit",
    "WorkerUnavailable": "supervisor.pool",
}

__all__ = [
    "AuditStream",
    "CallEvent",
    "CallHandle",
    "DuplicateOperation",
    "Outcome",
    "Supervisor",
    "SupervisorError",
    "WorkerUnavailable",
]
assert sorted(__all__) == sorted(_LAZY)

if TYPE_CHECKING:
    from supervisor.audit import AuditStream, CallEvent
    from supervisor.calls import CallHandle
    from supervisor.outcome import Outcome
    from supervisor.pool import WorkerUnavailable
    from supervisor.supervisor import DuplicateOperation, Supervisor, SupervisorError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'supervisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
