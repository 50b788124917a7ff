"""The `sandvisor serve` wire format: requests and events as strict msgspec Structs.

JSON lines both ways (docs/serve-protocol.md, schema in docs/serve-protocol.schema.json).
A request is an object whose ``op`` names it; an event is an object whose ``event``
names it. Every event about a request carries that request's ``id``. Decoding is strict:
an unknown field, a wrong type or an unknown ``op`` is a `RequestError` with one clear
line, never a crash. Sans-IO: this module only turns bytes into values and back.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from sandbox.netproxy.events import NetEvent
from supervisor.commands.request_id import top_level_id
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.outcome import Outcome

PROTOCOL_VERSION = 1
#: Longest request line accepted (bytes, before the newline).
MAX_LINE_BYTES = 4 * 1024 * 1024

RequestId = (
    Annotated[int, msgspec.Meta(ge=-(2**53), le=2**53)]
    | Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
)
Seconds = Annotated[float, msgspec.Meta(gt=0, le=86400)]
Count = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]


class _Request(msgspec.Struct, tag_field="op", forbid_unknown_fields=True, kw_only=True):
    id: RequestId | None = None


#: A network allowlist entry: ``HOST[:PORT]`` (an exact name, ``*.domain``, an IP
#: address or ``*``; no port or ``*`` for any), as ``sandvisor exec --allow-net`` takes it.
NetPattern = Annotated[str, msgspec.Meta(min_length=1, max_length=300)]


class PolicyOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The sandbox options a client may set: an absent one keeps the server's default,
    ``null`` turns a limit off, ``env`` adds to the default environment. ``network``:
    ``false`` (none), ``true`` (the host's), or an allowlist reached through the proxy,
    with its per-call caps and names pinned to addresses (as the config file's keys)."""

    network: bool | list[NetPattern] | UnsetType = UNSET
    network_max_connections: Count | UnsetType | None = UNSET
    network_max_bytes: Annotated[int, msgspec.Meta(ge=1)] | UnsetType | None = UNSET
    network_hosts: dict[str, str] | UnsetType = UNSET
    memory_bytes: int | UnsetType | None = UNSET
    pids: int | UnsetType | None = UNSET
    cpu_seconds: int | UnsetType | None = UNSET
    tmpfs_bytes: int | UnsetType = UNSET
    open_files: int | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET


class Hello(_Request, tag="hello"):
    """Configure the service: which adapters, which sandbox, how many workers."""

    adapters: list[str] | None = None
    policy: PolicyOptions | None = None
    pool_size: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None
    max_in_flight: Annotated[int, msgspec.Meta(ge=1, le=64)] | None = None
    cancel_grace: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    audit: bool = False
    script: str | None = None


class Invoke(_Request, tag="invoke"):
    """Run one call of ``tool`` with ``input``: events ``started`` (if asked for),
    ``chunk``s (if ``stream``), then ``outcome``. ``deadline`` in seconds from now."""

    tool: str
    input: Any = None
    deadline: Seconds | None = None
    idempotency_key: str | None = None
    stream: bool = True
    started: bool = False


class Script(_Request, tag="script"):
    """Run a bash script whose commands are the sandboxed tools (hello's ``script``)."""

    commands: str
    timeout_ms: Annotated[int, msgspec.Meta(ge=0)] | None = None


class Cancel(_Request, tag="cancel"):
    """Cancel the running request ``target`` cooperatively (answered ``ok``; the target
    still ends with its own ``outcome``, ``result`` or ``error``)."""

    target: RequestId


class Audit(_Request, tag="audit"):
    """Start (or stop) receiving one ``audit`` event per finished call."""

    enable: bool = True


class Pending(_Request, tag="pending"):
    """List the operations the ledger holds open (queued, running, indeterminate)."""


class Reconcile(_Request, tag="reconcile"):
    """Ask a fresh worker about an (indeterminate) operation and apply its answer."""

    op_id: Annotated[int, msgspec.Meta(ge=1)]


class Ping(_Request, tag="ping"):
    """Answered ``pong`` at once (before hello too)."""


class Shutdown(_Request, tag="shutdown"):
    """Cancel what runs (each still reports), close every worker, answer ``bye``, exit."""


Request = Hello | Invoke | Script | Cancel | Audit | Pending | Reconcile | Ping | Shutdown
OPS = ("hello", "invoke", "script", "cancel", "audit", "pending", "reconcile", "ping",
       "shutdown")  # fmt: skip


# -- events ----------------------------------------------------------------------------------


class _Event(msgspec.Struct, tag_field="event", kw_only=True):
    id: RequestId | None = None


class ToolInfo(msgspec.Struct, kw_only=True):
    name: str
    format: str
    deadline: float | None
    max_input_bytes: int
    max_output_bytes: int
    max_attempts: int
    description: str = ""
    schema: dict[str, Any] | None = None


class Ready(_Event, tag="ready"):
    """hello succeeded: the tools the workers serve."""

    version: str
    tools: list[ToolInfo]
    protocol: int = PROTOCOL_VERSION
    script: str | None = None


class Started(_Event, tag="started"):
    """An invoke was accepted: its ledger operation."""

    op_id: int


class ChunkEvent(_Event, tag="chunk"):
    """One streamed chunk of an invoke (redacted, within the tool's stream limits)."""

    index: int
    text: str


class OutcomeEvent(_Event, tag="outcome"):
    """How an invoke ended: exactly one per accepted invoke."""

    outcome: Outcome


class ScriptResult(msgspec.Struct, kw_only=True):
    stdout: str
    stderr: str
    exit_code: int
    error: str | None
    stdout_truncated: bool
    stderr_truncated: bool


class ResultEvent(_Event, tag="result"):
    """How a script ended."""

    result: ScriptResult


class AuditEvent(_Event, tag="audit"):
    """A call's audit event (after ``audit``); ``id`` is null."""

    audit: CallEvent


class NetAuditEvent(_Event, tag="net"):
    """A sandbox's connection through the network proxy, allowed or refused (after
    ``audit``); ``id`` is null."""

    net: NetEvent


class PendingEvent(_Event, tag="pending"):
    operations: list[Any]


class Reconciled(_Event, tag="reconciled"):
    op_id: int
    resolved: bool
    outcome: Any = None


class Ok(_Event, tag="ok"):
    pass


class Pong(_Event, tag="pong"):
    pass


class Bye(_Event, tag="bye"):
    pass


class ErrorInfo(msgspec.Struct, kw_only=True):
    code: str
    message: str


class ErrorEvent(_Event, tag="error"):
    """A request could not be served (or ended early): one line, a stable ``code``."""

    error: ErrorInfo


Event = (
    Ready | Started | ChunkEvent | OutcomeEvent | ResultEvent | AuditEvent | NetAuditEvent
    | PendingEvent | Reconciled | Ok | Pong | Bye | ErrorEvent
)  # fmt: skip


# -- codec --------------------------------------------------------------------------------------


class RequestError(Exception):
    """A request that cannot be served: ``code`` for programs, the message for people.
    ``request_id`` is the request's id when it could be read."""

    def __init__(self, code: str, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


_decoder = msgspec.json.Decoder(Request)
_encoder = msgspec.json.Encoder()


def decode_request(line: bytes) -> Request:
    """One request line (without the newline) to its Struct; `RequestError` says why not."""
    try:
        return _decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise RequestError("bad_request", _explain(str(exc)), _id_of(line)) from None
    except msgspec.DecodeError as exc:
        raise RequestError("bad_json", f"not a JSON object: {exc}", None) from None
    except RecursionError:
        message = "not a JSON object: nested too deeply"
        raise RequestError("bad_json", message, _id_of(line)) from None


def _id_of(line: bytes) -> Any:
    """The request's ``id``, if the line is an object with a valid one (to answer it);
    read by a flat scan, so any nesting elsewhere in the line is no matter."""
    rid = top_level_id(line)
    if isinstance(rid, bool):
        return None
    if isinstance(rid, int) and abs(rid) <= 2**53:
        return rid
    if isinstance(rid, str) and 0 < len(rid) <= 128:
        return rid
    return None


def _explain(message: str) -> str:
    if "`$.op`" in message:
        return f"{message}; op is one of: {', '.join(OPS)}"
    if "missing required field `op`" in message:
        return f"{message}; every request names its op ({', '.join(OPS)})"
    return message


def json_schema() -> dict[str, Any]:
    """The protocol as one JSON Schema document (docs/serve-protocol.schema.json):
    ``$defs/Request`` for lines a client sends, ``$defs/Event`` for lines it reads."""
    (request, event), defs = msgspec.json.schema_components(
        (Request, Event), ref_template="#/$defs/{name}"
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"sandvisor serve protocol, version {PROTOCOL_VERSION}",
        "description": "JSON lines over stdio or a Unix socket: a client sends Request "
        "lines and reads Event lines (docs/serve-protocol.md).",
        "oneOf": [{"$ref": "#/$defs/Request"}, {"$ref": "#/$defs/Event"}],
        "$defs": {"Request": request, "Event": event, **dict(sorted(defs.items()))},
    }


def encode_event(event: Event) -> bytes:
    """One event as a JSON line."""
    return _encoder.encode(event) + b"\n"


def error_event(request_id: Any, code: str, message: str) -> bytes:
    """An error event line; the message is kept to one line."""
    first = message.strip().splitlines()[0] if message.strip() else code
    return encode_event(ErrorEvent(id=request_id, error=ErrorInfo(code=code, message=first)))


class LineBuffer:
    """Splits a byte stream into lines of at most ``limit`` bytes.

    ``feed`` returns the complete lines (without newlines); an over-long line is
    returned as `TooLong` once, and the rest of it is skipped up to its newline.
    """

    __slots__ = ("_buffer", "_limit", "_skipping")

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._limit = limit
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes | TooLong]:
        out: list[bytes | TooLong] = []
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            piece = data[start:newline]
            start = newline + 1
            if self._skipping:
                self._skipping = False
                continue
            if len(self._buffer) + len(piece) > self._limit:
                self._buffer.clear()
                out.append(TooLong())
                continue
            if self._buffer:
                self._buffer += piece
                out.append(bytes(self._buffer))
                self._buffer.clear()
            else:
                out.append(piece)
        rest = data[start:]
        if rest and not self._skipping:
            if len(self._buffer) + len(rest) > self._limit:
                self._buffer.clear()
                self._skipping = True
                out.append(TooLong())
            else:
                self._buffer += rest
        return out

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held."""
        return len(self._buffer)


class TooLong:
    """Marks a line over the limit (it was dropped)."""

    __slots__ = ()
