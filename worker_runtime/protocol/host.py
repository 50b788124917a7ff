"""`HostConnection`: the host's sans-IO protocol state machine (spec sections 4, 7-9).

It has no threads, clocks or I/O. The supervisor's writer task writes the exact lines its
``open``/``invoke``/``cancel``/``reconcile``/``ping``/``close`` methods return, and its
reader task hands each received line to `receive`, which returns one event (or None while
a terminal frame is held back behind a cancel). A send the worker would have to reject
raises `Refused` and changes nothing. A received defect raises a `ProtocolError`, after
which the connection is dead for good (the session is poisoned).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec

from .endpoint import Endpoint
from .errors import (
    CancelMismatch,
    CancelOutOfOrder,
    OutputTooLarge,
    ProtocolError,
    Refused,
    StateViolation,
    ToolNotServed,
    UnexpectedEof,
    UnexpectedMessage,
    UnknownRequest,
)
from .keys import DirectionalKeys
from .limits import DEFAULT_MAX_IN_FLIGHT, ID_MATCH, KEY_BYTES, MAX_NONCE_CHARS, is_id
from .messages import (
    Cancel,
    CancelResult,
    Chunk,
    Close,
    Error,
    Failed,
    Grant,
    Invoke,
    Open,
    Payload,
    Ping,
    Pong,
    Ready,
    Reconcile,
    Reconciled,
    Result,
    Running,
    SignedEntry,
    Status,
    Succeeded,
    ToolSpec,
    UnknownState,
    WorkerMessage,
)
from .payloads import check_message_text, check_payload, check_spec, make_payload
from .rules import CANCEL_REQUESTED, CANCEL_UNSUPPORTED, Call, SessionRules, index_grants

# -- events returned by HostConnection.receive -----------------------------------------


class HostEvent(msgspec.Struct, frozen=True):
    """Base of what `HostConnection.receive` returns."""


class WorkerReady(HostEvent, frozen=True):
    """The worker's answer to `open`: every granted tool described (`ToolSpec`)."""

    tools: list[ToolSpec]
    impl: str
    version: str


class ChunkReceived(HostEvent, frozen=True):
    rid: str
    index: int
    text: str


class ResultReceived(HostEvent, frozen=True):
    """Terminal success. ``too_late``: it won a race against our cancel."""

    rid: str
    payload: Payload
    too_late: bool = False


class ErrorReceived(HostEvent, frozen=True):
    """Terminal adapter failure. ``too_late``: it won a race against our cancel."""

    rid: str
    code: str
    message: str
    retryable: bool
    too_late: bool = False


class CancelAcknowledged(HostEvent, frozen=True):
    """Terminal: the adapter stopped; the only outcome that means "cancelled"."""

    rid: str
    cid: str


class CancelUnsupported(HostEvent, frozen=True):
    """Not terminal: the call stays in flight and may still end normally."""

    rid: str
    cid: str


class ReconcileAnswered(HostEvent, frozen=True):
    """``journal``: for an effectful tool, the entries the status comes from (section 11):
    unchecked here; the host checks their tags with the operation's journal key."""

    rid: str
    tool: str
    operation_key: str
    status: Status
    journal: list[SignedEntry] | None = None


class PongReceived(HostEvent, frozen=True):
    nonce: str


TerminalEvent = ResultReceived | ErrorReceived | CancelAcknowledged


#: A terminal event of a call, as `_settle` hands it back.
_Terminal = TypeVar("_Terminal", "ResultReceived", "ErrorReceived")


class _HostCall(Call):
    """A call in flight as the host sees it: plus a terminal frame held behind a cancel."""

    __slots__ = ("held",)

    def __init__(self, rid: str, grant: Grant, idempotency_key: str, input_bytes: int) -> None:
        super().__init__(rid, grant, idempotency_key, input_bytes)
        self.held: ResultReceived | ErrorReceived | None = None


class HostConnection(Endpoint[WorkerMessage, HostEvent | None]):
    """One session, host side.

    Ids are minted here (``r1``, ``c2``, ``q3``, ``p4`` ...), so they are unique per
    session. An `invoke` is refused unless every call in flight (the new one included)
    keeps an id free for its `cancel`, so a deadline can always be followed by a cancel.
    """

    def __init__(
        self,
        session_id: str,
        keys: DirectionalKeys,
        grants: Iterable[Grant],
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if not is_id(session_id):
            raise ValueError("session id must be 1..128 bytes of [a-z0-9._-]")
        grant_list = list(grants)
        try:  # the worker decodes grants strictly: validate them the same way
            msgspec.json.decode(msgspec.json.encode(grant_list), type=list[Grant])
        except msgspec.ValidationError as exc:
            raise ValueError(f"invalid grant: {exc}") from None
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError("max_in_flight must be an int >= 1")
        try:
            by_tool = index_grants(grant_list)
        except ProtocolError as exc:
            raise ValueError(str(exc)) from None
        super().__init__(session_id, keys.host, keys.worker, WorkerMessage)
        self._grant_list = grant_list
        self._rules: SessionRules[_HostCall] = SessionRules(by_tool, max_in_flight)
        self._calls = self._rules.in_flight
        self._counter = 0
        self._opened = False
        self._ready: WorkerReady | None = None
        self._closing = False
        self._cancels: dict[str, _HostCall] = {}  # cid -> call, awaiting an outcome
        self._reconciles: dict[str, tuple[str, str]] = {}  # rid -> (tool, operation_key)
        self._pings: set[str] = set()

    # -- what the supervisor reads ------------------------------------------------------

    @property
    def ready(self) -> WorkerReady | None:
        return self._ready

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def grants(self) -> Mapping[str, Grant]:
        return MappingProxyType(self._rules.grants)

    @property
    def max_in_flight(self) -> int:
        return self._rules.max_in_flight

    @property
    def in_flight(self) -> tuple[str, ...]:
        """Rids whose terminal event has not been returned yet."""
        return tuple(self._calls)

    @property
    def calls(self) -> Mapping[str, Call]:
        """Calls in flight by rid (read-only view: chunks, chunk_bytes, cancel, ...)."""
        return MappingProxyType(self._calls)

    def call(self, rid: str) -> Call | None:
        """The call in flight as ``rid``, or None (cheaper than `calls` for one look-up)."""
        return self._calls.get(rid)

    @property
    def ids_used(self) -> int:
        return len(self._rules.ids)

    def calls_used(self, tool: str) -> int:
        return self._rules.calls_used.get(tool, 0)

    def holds_terminal(self, rid: str) -> bool:
        """True while a result/error of ``rid`` waits for the `too_late` of our cancel."""
        call = self._calls.get(rid)
        return call is not None and call.held is not None

    @property
    def pending_pings(self) -> frozenset[str]:
        return frozenset(self._pings)

    @property
    def pending_reconciles(self) -> tuple[str, ...]:
        return tuple(self._reconciles)

    # -- sending: each returns the exact line to write ----------------------------------

    def open(self) -> bytes:
        """The first frame: grants and ``max_in_flight``."""
        self._check_usable()
        if self._opened:
            raise Refused("already_open", "open was already sent")
        line = self._sealer.seal(
            Open, grants=self._grant_list, max_in_flight=self._rules.max_in_flight
        )
        self._opened = True
        return line

    def invoke(
        self,
        tool: str,
        value: Any,
        *,
        idempotency_key: str,
        attempt: int = 1,
        deadline_ms: int | None = None,
        journal_key: bytes | None = None,
    ) -> tuple[str, bytes]:
        """Start a call; returns its minted rid and the line. ``journal_key``: the
        operation's key for the worker's journal (32 bytes; section 11), or None.

        The hot path: each rule is checked once, in the order the worker checks it."""
        if self._dead is not None or not self._opened or self._closing:
            self._check_sendable()
        is_str = type(idempotency_key) is str or isinstance(idempotency_key, str)
        if not is_str or ID_MATCH(idempotency_key) is None:
            raise Refused("bad_id", "idempotency_key must be 1..128 bytes of [a-z0-9._-]")
        if type(attempt) is not int and (not isinstance(attempt, int) or isinstance(attempt, bool)):
            raise Refused("bad_attempt", "attempt must be an int >= 1")
        if attempt < 1:
            raise Refused("bad_attempt", "attempt must be an int >= 1")
        if deadline_ms is not None and (
            not isinstance(deadline_ms, int) or isinstance(deadline_ms, bool) or deadline_ms < 0
        ):
            raise Refused("bad_deadline", "deadline_ms must be None or an int >= 0")
        hex_key = None
        if journal_key is not None:
            if not isinstance(journal_key, bytes) or len(journal_key) != KEY_BYTES:
                raise Refused("bad_journal_key", f"a journal key is {KEY_BYTES} bytes")
            hex_key = journal_key.hex()
        rid = f"r{self._counter + 1}"
        calls = self._calls
        # every call in flight (this one too) keeps an id free for its cancel
        reserve = sum(1 for c in calls.values() if c.cid is None) + 1 if calls else 1
        rules = self._rules
        try:
            grant = rules.grants.get(tool) or rules.grant_for(tool)  # the helper refuses
            payload = make_payload(value, grant.format, "invoke input")
            size = rules.check_invoke(rid, grant, payload, extra_reserved=reserve)
        except StateViolation as exc:
            raise Refused.because(exc) from None
        line = self._sealer.seal(
            Invoke, rid, tool, payload, attempt, idempotency_key, deadline_ms, hex_key
        )  # rid, tool, payload, attempt, idempotency_key, deadline_ms, journal_key
        self._counter += 1
        rules.admit_invoke(_HostCall(rid, grant, idempotency_key, size))
        return rid, line

    def cancel(self, rid: str) -> tuple[str, bytes]:
        """Ask the worker to stop ``rid``; returns the minted cid and the line."""
        self._check_sendable()
        call = self._calls.get(rid)
        if call is None:
            raise Refused("not_in_flight", f"{rid!r} is not in flight")
        if call.cid is not None:
            raise Refused("cancel_repeated", f"{rid!r} was already cancelled ({call.cid})")
        cid = self._peek_id("c")
        try:
            self._rules.check_fresh_id(cid)
        except StateViolation as exc:
            raise Refused.because(exc) from None
        line = self._sealer.seal(Cancel, cid=cid, rid=rid, tool=call.tool)
        self._take_id()
        self._rules.ids.add(cid)
        call.cid = cid
        call.cancel = CANCEL_REQUESTED
        self._cancels[cid] = call
        return cid, line

    def reconcile(self, tool: str, operation_key: str) -> tuple[str, bytes]:
        """Ask what the worker knows of an operation; returns the minted rid and the line."""
        self._check_sendable()
        if not is_id(operation_key):
            raise Refused("bad_id", "operation_key must be 1..128 bytes of [a-z0-9._-]")
        rid = self._peek_id("q")
        reserve = sum(1 for c in self._calls.values() if c.cid is None)
        try:
            self._rules.grant_for(tool)
            self._rules.check_fresh_id(rid, extra_reserved=reserve)
        except StateViolation as exc:
            raise Refused.because(exc) from None
        line = self._sealer.seal(Reconcile, rid=rid, tool=tool, operation_key=operation_key)
        self._take_id()
        self._rules.ids.add(rid)
        self._reconciles[rid] = (tool, operation_key)
        return rid, line

    def ping(self, nonce: str | None = None) -> tuple[str, bytes]:
        """A liveness probe; returns the nonce (minted unless given) and the line."""
        self._check_sendable()
        minted = nonce is None
        if nonce is None:
            nonce = self._peek_id("p")
        if not isinstance(nonce, str) or not 1 <= len(nonce) <= MAX_NONCE_CHARS:
            raise Refused("bad_nonce", f"nonce must be 1..{MAX_NONCE_CHARS} characters")
        if nonce in self._pings:
            raise Refused("duplicate_nonce", f"a ping with nonce {nonce!r} is pending")
        line = self._sealer.seal(Ping, nonce=nonce)
        if minted:
            self._take_id()
        self._pings.add(nonce)
        return nonce, line

    def close(self) -> bytes:
        """The graceful end; refused while any call is in flight."""
        self._check_sendable()
        if self._calls:
            raise Refused("close_while_in_flight", f"{len(self._calls)} calls are in flight")
        line = self._sealer.seal(Close)
        self._closing = True
        return line

    # -- receiving -----------------------------------------------------------------------

    def receive_eof(self) -> None:
        """The worker's stream ended: fine only after our close, with nothing pending."""
        if self._dead is not None:
            return
        if self._closing and not (self._calls or self._reconciles or self._pings):
            return
        raise self._die(UnexpectedEof("the worker's stream ended without a clean close"))

    # -- internals -----------------------------------------------------------------------

    def _apply(self, msg: WorkerMessage) -> HostEvent | None:
        """Receiver check 10: is this authentic frame valid now? Returns the event."""
        kind = type(msg)
        if kind is Result and self._ready is not None:  # the hot path first
            return self._on_result(msg)  # type: ignore[arg-type]
        if self._ready is None:
            if kind is not Ready or not self._opened:
                raise UnexpectedMessage(f"{_kind(msg)} before ready")
            return self._on_ready(msg)  # type: ignore[arg-type]
        if kind is Chunk:
            return self._on_chunk(msg)  # type: ignore[arg-type]
        if kind is Error:
            return self._on_error(msg)  # type: ignore[arg-type]
        if kind is CancelResult:
            return self._on_cancel_result(msg)  # type: ignore[arg-type]
        if kind is Reconciled:
            return self._on_reconciled(msg)  # type: ignore[arg-type]
        if kind is Pong:
            assert isinstance(msg, Pong)
            if msg.nonce not in self._pings:
                raise UnexpectedMessage(f"pong {msg.nonce!r} without a matching ping")
            self._pings.discard(msg.nonce)
            return PongReceived(msg.nonce)
        raise UnexpectedMessage(f"{_kind(msg)} after ready")

    def _on_ready(self, msg: Ready) -> WorkerReady:
        grants = self._rules.grants
        described = {spec.name: spec for spec in msg.tools}
        missing = set(grants).difference(described)
        if missing:
            raise ToolNotServed(f"the worker does not serve {sorted(missing)}")
        for name, spec in described.items():
            grant = grants.get(name)
            if grant is not None and spec.format != grant.format:
                raise ToolNotServed(
                    f"{name!r} is granted as {grant.format}, served as {spec.format}"
                )
            check_spec(spec)
        self._ready = WorkerReady(list(msg.tools), msg.impl, msg.version)
        return self._ready

    def _in_flight(self, rid: str, kind: str) -> _HostCall:
        call = self._calls.get(rid)
        if call is None:
            raise UnknownRequest(f"{kind} for {rid!r}, which is not in flight")
        return call

    def _on_chunk(self, msg: Chunk) -> ChunkReceived:
        call = self._in_flight(msg.rid, "chunk")
        if call.held is not None:
            raise UnexpectedMessage(f"chunk for {msg.rid!r} after its terminal frame")
        if msg.index != call.chunks + 1:
            raise UnexpectedMessage(f"chunk index {msg.index}, expected {call.chunks + 1}")
        size = self._rules.check_chunk(call, msg.text)
        self._rules.admit_chunk(call, size)
        return ChunkReceived(msg.rid, msg.index, msg.text)

    def _on_result(self, msg: Result) -> ResultReceived | None:
        call = self._calls.get(msg.rid)  # `_in_flight`, inline: every call ends here
        if call is None:
            raise UnknownRequest(f"result for {msg.rid!r}, which is not in flight")
        if call.held is not None:
            raise UnexpectedMessage(f"a second terminal frame for {msg.rid!r}")
        grant = call.grant
        check_payload(msg.payload, grant.format, grant.max_output_bytes, OutputTooLarge, "result")
        return self._settle(call, ResultReceived(msg.rid, msg.payload))

    def _on_error(self, msg: Error) -> ErrorReceived | None:
        call = self._in_flight(msg.rid, "error")
        if call.held is not None:
            raise UnexpectedMessage(f"a second terminal frame for {msg.rid!r}")
        check_message_text(msg.message, "error message")
        return self._settle(call, ErrorReceived(msg.rid, msg.code, msg.message, msg.retryable))

    def _settle(self, call: _HostCall, event: _Terminal) -> _Terminal | None:
        """A result or error in time: the call's end, unless a cancel is pending, when
        it is held until the worker answers that cancel (``too_late``)."""
        if call.cancel == CANCEL_REQUESTED:
            call.held = event
            return None
        self._finish(call)
        return event

    def _on_cancel_result(self, msg: CancelResult) -> HostEvent:
        call = self._cancels.get(msg.cid)
        if call is None:
            raise CancelMismatch(f"cancel_result for {msg.cid!r} without a pending cancel")
        if msg.rid != call.rid or msg.tool != call.tool:
            raise CancelMismatch(f"cancel_result {msg.cid!r} does not match its cancel")
        held = call.held
        if msg.outcome == "acknowledged":
            if held is not None:
                raise CancelOutOfOrder(f"acknowledged after the terminal frame of {call.rid!r}")
            self._finish(call)
            return CancelAcknowledged(call.rid, msg.cid)
        if msg.outcome == "too_late":
            if held is None:
                raise CancelOutOfOrder(f"too_late before the terminal frame of {call.rid!r}")
            self._finish(call)
            return msgspec.structs.replace(held, too_late=True)
        if held is not None:
            raise CancelOutOfOrder(f"unsupported after the terminal frame of {call.rid!r}")
        del self._cancels[msg.cid]
        call.cancel = CANCEL_UNSUPPORTED
        return CancelUnsupported(call.rid, msg.cid)

    def _on_reconciled(self, msg: Reconciled) -> ReconcileAnswered:
        asked = self._reconciles.get(msg.rid)
        if asked is None:
            raise UnknownRequest(f"reconciled for {msg.rid!r} without a pending reconcile")
        if (msg.tool, msg.operation_key) != asked:
            raise CancelMismatch(f"reconciled {msg.rid!r} does not match its reconcile")
        status = msg.status
        grant = self._rules.grants[msg.tool]
        if isinstance(status, Succeeded):
            check_payload(
                status.payload, grant.format, grant.max_output_bytes, OutputTooLarge, "result"
            )
        elif isinstance(status, Failed):
            check_message_text(status.message, "failed message")
        self._check_journal(msg)
        del self._reconciles[msg.rid]
        return ReconcileAnswered(msg.rid, msg.tool, msg.operation_key, status, msg.journal)

    def _check_journal(self, msg: Reconciled) -> None:
        """Section 11's shape of an answer: an effectful tool's terminal status comes with
        the start and end entries it is recorded in, ``running`` with at most the start,
        ``unknown`` with none; any other tool's answer carries no entries."""
        assert self._ready is not None
        spec = next((t for t in self._ready.tools if t.name == msg.tool), None)
        count = 0 if msg.journal is None else len(msg.journal)
        if spec is None or not spec.effectful:
            if count:
                raise UnexpectedMessage(
                    f"reconciled {msg.rid!r} relays a journal for a tool not declared effectful"
                )
            return
        status = msg.status
        if isinstance(status, UnknownState):
            allowed: tuple[int, ...] = (0,)
        elif isinstance(status, Running):
            allowed = (0, 1)
        else:
            allowed = (2,)
        if count not in allowed:
            raise UnexpectedMessage(
                f"reconciled {msg.rid!r} says {type(status).__name__} with {count} journal "
                f"entries (section 11 wants {' or '.join(map(str, allowed))})"
            )

    def _finish(self, call: _HostCall) -> None:
        del self._calls[call.rid]
        if call.cid is not None:
            self._cancels.pop(call.cid, None)

    def _check_sendable(self) -> None:
        self._check_usable()
        if not self._opened:
            raise Refused("not_open", "open must be sent first")
        if self._closing:
            raise Refused("closing", "close was already sent")

    def _peek_id(self, prefix: str) -> str:
        return f"{prefix}{self._counter + 1}"

    def _take_id(self) -> None:
        self._counter += 1


def _kind(msg: WorkerMessage) -> str:
    return type(msg).__name__.lower()
