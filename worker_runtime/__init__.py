"""The worker side of sandvisor: runs inside the sandbox, imports only msgspec and the stdlib.

Adapter authors use `AdapterRegistry`, `Context` and `Cancelled` (and the typed
`AdapterError` family); the wire protocol lives in `worker_runtime.protocol`, shared with
the host.
"""

from __future__ import annotations

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
