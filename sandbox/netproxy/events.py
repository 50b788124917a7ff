"""`NetEvent`: the audit record of one connection through the proxy, allowed or refused.

One event per connection, when it ends: who asked (the sandbox's group and session, the
tool and call in flight), what for (protocol, host and port as the client wrote them,
the address used), the verdict (``allowed``, and ``reason`` when refused or cut short),
and the bytes each way. A refused connection moved no bytes to any server.
"""

from __future__ import annotations

import msgspec

SCHEMA_VERSION = 1


class NetEvent(msgspec.Struct, frozen=True, kw_only=True):
    event: str = "net"
    v: int = SCHEMA_VERSION
    time: float
    group: str | None
    sandbox: str | None
    tool: str | None
    call: str | None
    also: tuple[str, ...] = ()  # other calls in flight on the sandbox, charged too
    protocol: str | None  # connect | http | socks5 (None: refused before it said)
    host: str | None
    port: int | None
    address: str | None
    allowed: bool
    reason: str | None
    detail: str | None
    bytes_up: int  # sandbox -> server
    bytes_down: int  # server -> sandbox
    duration_ms: float
