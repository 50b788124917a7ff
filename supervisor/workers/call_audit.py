"""One structured JSON audit event per supervised call, to streams, callbacks and a file.

The event says what happened to the call as the supervisor saw it (ids, tool, attempt,
status, durations, bytes, chunks, kill reason, the sandbox's classification, peak
memory). It does not repeat the ledger's hash-chained transitions: it names the ledger
event that vouches for the call's end (``ledger_seq``/``ledger_hash``), so a reader can
join the two and verify the chain.

Delivery never blocks a call: a stream that falls behind drops events and counts them
(``AuditStream.dropped``); a callback runs synchronously and must be quick; the log file
gets one ``write`` per event (JSON lines, ``O_APPEND``). A log file that cannot be
written stops the supervisor from taking new calls (fail closed).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import TracebackType

import anyio
import msgspec

from sandbox.netproxy.events import NetEvent
from supervisor.workers.outcome import Outcome, Status

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
#: Longest error text kept in an event (the Outcome keeps the whole message).
MAX_ERROR_CHARS = 256
DEFAULT_STREAM_CAPACITY = 1024


class CallEvent(msgspec.Struct, frozen=True, kw_only=True):
    """The audit event of one call (schema in docs/supervisor.md)."""

    event: str = "call"
    v: int = SCHEMA_VERSION
    time: float
    op_id: int | None
    session_id: str | None
    rid: str | None
    idempotency_key: str | None
    tool: str
    attempt: int
    status: Status
    error_code: str | None
    error: str | None
    kill_reason: str | None
    termination: str | None
    queued_ms: float
    run_ms: float
    total_ms: float
    bytes_in: int
    bytes_out: int
    chunks: int
    peak_memory: int | None
    ledger_seq: int | None
    ledger_hash: str | None

    @classmethod
    def of(cls, outcome: Outcome, *, time: float, ledger_head: tuple[int, str] | None) -> CallEvent:
        error = outcome.error
        if error is not None and len(error) > MAX_ERROR_CHARS:
            error = error[:MAX_ERROR_CHARS] + "..."
        return cls(
            time=time,
            op_id=outcome.op_id,
            session_id=outcome.session_id,
            rid=outcome.rid,
            idempotency_key=outcome.idempotency_key,
            tool=outcome.tool,
            attempt=outcome.attempt,
            status=outcome.status,
            error_code=outcome.error_code,
            error=error,
            kill_reason=outcome.kill_reason,
            termination=outcome.termination,
            queued_ms=round(outcome.queued_s * 1000, 3),
            run_ms=round(outcome.run_s * 1000, 3),
            total_ms=round(outcome.total_s * 1000, 3),
            bytes_in=outcome.bytes_in,
            bytes_out=outcome.bytes_out,
            chunks=outcome.chunks,
            peak_memory=outcome.peak_memory,
            ledger_seq=None if ledger_head is None else ledger_head[0],
            ledger_hash=None if ledger_head is None else ledger_head[1],
        )


_encode = msgspec.json.Encoder().encode


def encode_event(event: CallEvent) -> bytes:
    """One JSON line."""
    return _encode(event) + b"\n"


class AuditStream:
    """Audit events as an async iterator (``async for event in stream``), bounded."""

    def __init__(self, hub: AuditHub, capacity: int) -> None:
        self._hub = hub
        self._send, self._recv = anyio.create_memory_object_stream[CallEvent](capacity)
        self.dropped = 0

    def _offer(self, event: CallEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def __aiter__(self) -> AuditStream:
        return self

    async def __anext__(self) -> CallEvent:
        try:
            return await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def receive_nowait(self) -> CallEvent:
        """The next buffered event; `anyio.WouldBlock` if none."""
        return self._recv.receive_nowait()

    def close(self) -> None:
        """Unsubscribe; the iterator ends after the buffered events."""
        self._hub.unsubscribe(self)
        self._send.close()

    async def __aenter__(self) -> AuditStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AuditHub:
    """Where call events go: subscribed streams, callbacks, and an optional log file.
    The network proxy's `NetEvent`s go to the same log file (``"event": "net"``) and to
    callbacks of their own."""

    def __init__(
        self,
        log_path: str | os.PathLike[str] | None = None,
        callbacks: tuple[Callable[[CallEvent], None], ...] = (),
    ) -> None:
        self._streams: set[AuditStream] = set()
        self._callbacks = list(callbacks)
        self._network_callbacks: list[Callable[[NetEvent], None]] = []
        self._fd: int | None = None
        self.failure: str | None = None
        self.emitted = 0
        if log_path is not None:
            self._fd = os.open(
                os.fspath(log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
        #: True when an event would go anywhere (so callers can skip building it); kept
        #: up to date by every change of the sinks (it is read twice per call).
        self.active = False
        self._recount()

    def _recount(self) -> None:
        self.active = bool(self._fd is not None or self._callbacks or self._streams)

    def subscribe(self, capacity: int = DEFAULT_STREAM_CAPACITY) -> AuditStream:
        stream = AuditStream(self, capacity)
        self._streams.add(stream)
        self._recount()
        return stream

    def unsubscribe(self, stream: AuditStream) -> None:
        """``stream`` hears no more events (`AuditStream.close` calls this)."""
        self._streams.discard(stream)
        self._recount()

    def add_callback(self, callback: Callable[[CallEvent], None]) -> Callable[[], None]:
        self._callbacks.append(callback)
        self._recount()

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
                self._recount()

        return remove

    def add_network_callback(self, callback: Callable[[NetEvent], None]) -> Callable[[], None]:
        """Hear every connection through the network proxy (`NetEvent`)."""
        self._network_callbacks.append(callback)

        def remove() -> None:
            if callback in self._network_callbacks:
                self._network_callbacks.remove(callback)

        return remove

    def emit(self, event: CallEvent) -> None:
        self.emitted += 1
        self._write(event)
        for callback in self._callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("an audit callback failed")
        for stream in self._streams:
            stream._offer(event)

    def emit_network(self, event: NetEvent) -> None:
        """A connection's event: into the log file, and to the network callbacks."""
        self._write(event)
        for callback in self._network_callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("a network audit callback failed")

    def _write(self, event: CallEvent | NetEvent) -> None:
        if self._fd is None:
            return
        try:
            data = _encode(event) + b"\n"
            if os.write(self._fd, data) != len(data):
                raise OSError("short write")
        except OSError as exc:
            self.failure = f"the audit log cannot be written: {exc}"
            log.error("%s", self.failure)

    def close(self) -> None:
        for stream in list(self._streams):
            stream.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._recount()
