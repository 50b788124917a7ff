"""The worker side of sandvisor: runs inside the sandbox, imports only msgspec and the stdlib.

Adapter authors use `AdapterRegistry`, `Context` and `Cancelled` (and the typed
`AdapterError` family); the wire protocol lives in `worker_runtime.protocol`, shared with
the host.

The names below load `worker_runtime.adapters` when first used, not with the package: a
worker that needs no adapters (the MCP bridge, which starts its server before loading
anything it can do without) does not pay for them (typing, re, contextlib: tens of ms).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own costs an import; mypy reads any TYPE_CHECKING as true
if TYPE_CHECKING:
    from .adapters import (
        AdapterError,
        AdapterRegistry,
        Cancelled,
        Context,
        DeadlineExceeded,
        InvalidInput,
        Unavailable,
    )

__version__ = "0.1.0"

__all__ = [
    "AdapterError",
    "AdapterRegistry",
    "Cancelled",
    "Context",
    "DeadlineExceeded",
    "InvalidInput",
    "Unavailable",
    "__version__",
]


def __getattr__(name: str) -> object:
    if name in __all__:
        from . import adapters

        return getattr(adapters, name)
    raise AttributeError(f"module 'worker_runtime' has no attribute {name!r}")
