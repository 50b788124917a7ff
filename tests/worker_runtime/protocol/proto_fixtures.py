"""Fixtures for the sans-IO protocol tests: each connection against a raw, scriptable peer.

`HostSide` puts a real `HostConnection` against a raw worker (a `Sealer` that can forge
any frame, and an `Opener` that reads what the host sent). `WorkerSide` is the mirror.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

from worker_runtime.protocol.framing import Opener, Sealer
from worker_runtime.protocol.host import HostConnection, HostEvent
from worker_runtime.protocol.keys import derive_keys
from worker_runtime.protocol.messages import (
    Body,
    Cancel,
    Close,
    Grant,
    HostMessage,
    Invoke,
    Open,
    Ping,
    Reconcile,
    StreamLimits,
    TextPayload,
    WorkerMessage,
    grant,
)
from worker_runtime.protocol.worker import WorkerConnection, WorkerEvent

SESSION_KEY = bytes(range(1, 33))
SID = "sv-test"
KEYS = derive_keys(SESSION_KEY)

GRANTS = [
    grant("text.upper", max_calls=5, max_input_bytes=64, max_output_bytes=64),
    grant("json.echo", format="json", max_calls=3, max_input_bytes=4096, max_output_bytes=4096),
    grant(
        "progress.count",
        max_calls=3,
        stream=StreamLimits(max_chunks=3, max_chunk_bytes=8, max_total_bytes=12),
    ),
]


def forge(key: bytes, body: bytes) -> bytes:
    """A line with a valid tag over arbitrary body bytes (no trailing LF)."""
    return hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body


def deep(depth: int) -> list[Any]:
    """A JSON array nested ``depth`` levels (the root is level 1)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def lines(data: bytes) -> list[bytes]:
    """Split sealed output (one or more frames) into lines without their LF."""
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


class HostSide:
    """A real HostConnection; the worker is raw and can say anything."""

    def __init__(self, grants: Iterable[Grant] = GRANTS, max_in_flight: int = 2) -> None:
        self.host = HostConnection(SID, KEYS, grants, max_in_flight)
        self.worker = Sealer(KEYS.worker, SID)
        self.sent: Opener[HostMessage] = Opener(KEYS.host, SID, HostMessage)

    def say(self, kind: type[Body], **fields: Any) -> HostEvent | None:
        """Seal a worker frame and feed it to the host."""
        return self.host.receive(self.worker.seal(kind, **fields)[:-1])

    def read(self, line: bytes) -> HostMessage:
        """Open what the host sent, as the worker would."""
        return self.sent.open(line[:-1])

    def described(self, names: list[str]) -> list[Any]:
        """`ready`'s tool entries for ``names``, each in its grant's format (else text)."""
        from worker_runtime.protocol.messages import ToolSpec

        grants = self.host.grants
        return [ToolSpec(n, grants[n].format if n in grants else "text") for n in names]

    def opened(self, tools: list[str] | None = None) -> HostSide:
        from worker_runtime.protocol.messages import Ready

        self.read(self.host.open())
        tools = list(self.host.grants) if tools is None else tools
        self.say(Ready, tools=self.described(tools), impl="raw", version="0")
        return self

    def invoke(self, tool: str = "text.upper", value: Any = "hi", **kw: Any) -> str:
        kw.setdefault("idempotency_key", "op-1")
        rid, line = self.host.invoke(tool, value, **kw)
        msg = self.read(line)
        assert isinstance(msg, Invoke) and msg.rid == rid
        return rid

    def cancel(self, rid: str) -> str:
        cid, line = self.host.cancel(rid)
        msg = self.read(line)
        assert isinstance(msg, Cancel) and msg.cid == cid
        return cid


class WorkerSide:
    """A real WorkerConnection; the host is raw and can say anything."""

    def __init__(self, served: dict[str, str] | None = None) -> None:
        served = served if served is not None else {g.tool: g.format for g in GRANTS}
        self.worker = WorkerConnection(SID, KEYS, served)
        self.host = Sealer(KEYS.host, SID)
        self.sent: Opener[WorkerMessage] = Opener(KEYS.worker, SID, WorkerMessage)

    def say(self, kind: type[Body], **fields: Any) -> WorkerEvent:
        return self.worker.receive(self.host.seal(kind, **fields)[:-1])

    def read(self, data: bytes) -> list[WorkerMessage]:
        """Open what the worker produced (one or more frames), as the host would."""
        return [self.sent.open(line) for line in lines(data)]

    def opened(self, grants: Iterable[Grant] = GRANTS, max_in_flight: int = 2) -> WorkerSide:
        self.say(Open, grants=list(grants), max_in_flight=max_in_flight)
        self.read(self.worker.ready("test", "0"))
        return self

    def invoke(
        self, rid: str = "r1", tool: str = "text.upper", value: str = "hi", key: str = "op-1"
    ) -> WorkerEvent:
        return self.say(
            Invoke,
            rid=rid,
            tool=tool,
            payload=TextPayload(value),
            attempt=1,
            idempotency_key=key,
            deadline_ms=None,
        )

    def cancel(self, cid: str, rid: str, tool: str = "text.upper") -> WorkerEvent:
        return self.say(Cancel, cid=cid, rid=rid, tool=tool)

    def reconcile(self, rid: str, key: str, tool: str = "text.upper") -> WorkerEvent:
        return self.say(Reconcile, rid=rid, tool=tool, operation_key=key)

    def ping(self, nonce: str) -> WorkerEvent:
        return self.say(Ping, nonce=nonce)

    def close(self) -> WorkerEvent:
        return self.say(Close)
