"""sandvisor under somebody else's host: asyncio code, synchronous code and thread pools.

`AsyncioSupervisor` and `SyncSupervisor` take the `Supervisor`'s arguments: the first runs
it on the caller's asyncio loop, the second in a dedicated trio thread (`host_thread`); see
docs/hosting.md. The command-line hosts (`sandvisor serve`, `sandvisor mcp`) are commands:
`supervisor.commands.serve` and `supervisor.commands.mcp_server`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "AsyncioSupervisor": "supervisor.hosting.asyncio_host",
    "AsyncioCallHandle": "supervisor.hosting.asyncio_host",
    "AsyncioAuditStream": "supervisor.hosting.asyncio_host",
    "SyncSupervisor": "supervisor.hosting.sync_host",
    "SyncCallHandle": "supervisor.hosting.sync_host",
    "SyncAuditStream": "supervisor.hosting.sync_host",
    "HostedSupervisor": "supervisor.hosting.hosted",
}

__all__ = [
    "AsyncioAuditStream",
    "AsyncioCallHandle",
    "AsyncioSupervisor",
    "HostedSupervisor",
    "SyncAuditStream",
    "SyncCallHandle",
    "SyncSupervisor",
]
assert sorted(__all__) == sorted(_LAZY)

if TYPE_CHECKING:
    from supervisor.hosting.asyncio_host import (
        AsyncioAuditStream,
        AsyncioCallHandle,
        AsyncioSupervisor,
    )
    from supervisor.hosting.hosted import HostedSupervisor
    from supervisor.hosting.sync_host import SyncAuditStream, SyncCallHandle, SyncSupervisor


__getattr__ = lazy_exports(__name__, _LAZY)
