"""`WorkerConnection`: the worker's sans-IO protocol state machine (spec sections 4, 7-9).

The mirror of `HostConnection`. `receive` opens a host frame and enforces the session's
rules (grants, budgets, ``max_in_flight``, id capacity, cancel binding); every failure is
fatal. The producer methods return the exact bytes to write and only ever produce frames
in a legal order: a terminal frame after a pending cancel comes with its ``too_late``,
``acknowledged`` only without a terminal frame, no chunk beyond the stream grant, no
result beyond ``max_output_bytes``. Not thread-safe: the driver serialises access.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from .endpoint import Endpoint
from .errors import (
    CancelMismatch,
    CancelRepeated,
    CloseWhileInFlight,
    OutputTooLarge,
    Refused,
    StateViolation,
    ToolNotServed,
    UnexpectedEof,
    UnexpectedMessage,
    UnknownRequest,
)
from .journal import relayed_status
from .keys import DirectionalKeys
from .limits import MAX_LINE_BYTES, RECONCILE_MEMORY, is_id
from .messages import (
    Cancel,
    CancelledState,
    CancelResult,
    Chunk,
    Close,
    Error,
    Failed,
    Grant,
    HostMessage,
    Invoke,
    Open,
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
)
from .payloads import check_payload, clip_message, make_payload
from .rules import (
    CANCEL_REQUESTED,
    CANCEL_UNSUPPORTED,
    NOT_CANCELLED,
    Call,
    SessionRules,
    index_grants,
)

#: Payload bytes the reconcile memory keeps at most (beyond, the oldest are forgotten).
RECONCILE_MEMORY_BYTES = 64 * 1024 * 1024

# -- events returned by WorkerConnection.receive ---------------------------------------


class WorkerEvent(msgspec.Struct, frozen=True):
    """Base of what `WorkerConnection.receive` returns."""


class Opened(WorkerEvent, frozen=True):
    """The host's `open` was accepted; answer with `WorkerConnection.ready`."""

    grants: list[Grant]
    max_in_flight: int


class InvokeReceived(WorkerEvent, frozen=True):
    rid: str
    tool: str
    value: Any
    attempt: int
    idempotency_key: str
    deadline_ms: int | None
    journal_key: str | None = None


class CancelReceived(WorkerEvent, frozen=True):
    """A valid cancel. ``finished``: the call already ended; answer with `too_late`."""

    cid: str
    rid: str
    tool: str
    finished: bool


class ReconcileReceived(WorkerEvent, frozen=True):
    """Answer with `WorkerConnection.reconciled`."""

    rid: str
    tool: str
    operation_key: str


class PingReceived(WorkerEvent, frozen=True):
    """Answer with `WorkerConnection.pong`."""

    nonce: str


class CloseReceived(WorkerEvent, frozen=True):
    """The graceful end: nothing was in flight."""


class _Finished(NamedTuple):
    tool: str
    cancel_seen: bool


class WorkerConnection(Endpoint[HostMessage, WorkerEvent]):
    """One session, worker side. ``served`` maps each tool this worker runs to its
    `ToolSpec` (or just its format, for a tool with no description)."""

    def __init__(
        self, session_id: str, keys: DirectionalKeys, served: Mapping[str, ToolSpec | str]
    ) -> None:
        super().__init__(session_id, keys.worker, keys.host, HostMessage)
        self._served = {
            tool: spec if isinstance(spec, ToolSpec) else ToolSpec(tool, spec)  # type: ignore[arg-type]
            for tool, spec in served.items()
        }
        self._rules: SessionRules[Call] | None = None
        self._ready_sent = False
        self._closed = False
        self._finished: dict[str, _Finished] = {}
        self._owed_too_late: dict[str, tuple[str, str]] = {}  # cid -> (rid, tool)
        self._owed_reconciles: dict[str, tuple[str, str]] = {}  # rid -> (tool, key)
        self._owed_pongs: list[str] = []
        #: (tool, key) -> (status, payload bytes it holds), oldest first
        self._memory: OrderedDict[tuple[str, str], tuple[Status, int]] = OrderedDict()
        self._memory_bytes = 0

    # -- what the driver reads -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> tuple[str, ...]:
        return tuple(self._rules.in_flight) if self._rules else ()

    def call(self, rid: str) -> Call | None:
        return self._rules.in_flight.get(rid) if self._rules else None

    # -- receiving -----------------------------------------------------------------------

    def receive_eof(self) -> None:
        """The host's stream ended: fine only after `close`."""
        if self._dead is None and not self._closed:
            raise self._die(UnexpectedEof("the host's stream ended without close"))

    def _apply(self, msg: HostMessage) -> WorkerEvent:
        """Receiver check 10 on the worker: every rule is fatal."""
        if self._closed:
            raise UnexpectedMessage(f"{_kind(msg)} after close")
        rules = self._rules
        if rules is None:
            if not isinstance(msg, Open):
                raise UnexpectedMessage(f"{_kind(msg)} before open")
            return self._on_open(msg)
        if type(msg) is Invoke:
            return self._on_invoke(rules, msg)
        if isinstance(msg, Cancel):
            return self._on_cancel(rules, msg)
        if isinstance(msg, Reconcile):
            rules.grant_for(msg.tool)
            rules.check_fresh_id(msg.rid)
            rules.ids.add(msg.rid)
            self._owed_reconciles[msg.rid] = (msg.tool, msg.operation_key)
            return ReconcileReceived(msg.rid, msg.tool, msg.operation_key)
        if isinstance(msg, Ping):
            self._owed_pongs.append(msg.nonce)
            return PingReceived(msg.nonce)
        if isinstance(msg, Close):
            if rules.in_flight:
                raise CloseWhileInFlight(f"close with {len(rules.in_flight)} calls in flight")
            self._closed = True
            return CloseReceived()
        raise UnexpectedMessage(f"a second {_kind(msg)}")

    def _on_open(self, msg: Open) -> Opened:
        grants = index_grants(msg.grants)
        for tool, grant in grants.items():
            spec = self._served.get(tool)
            if spec is None or spec.format != grant.format:
                why = "not served" if spec is None else f"served as {spec.format}"
                raise ToolNotServed(f"granted tool {tool!r} ({grant.format}) is {why}")
        self._rules = SessionRules(grants, msg.max_in_flight)
        return Opened(list(msg.grants), msg.max_in_flight)

    def _on_invoke(self, rules: SessionRules[Call], msg: Invoke) -> InvokeReceived:
        # Not remembered as Running here: `reconciled` answers running for any call in
        # flight, and the call's end is remembered (so its key moves to the newest slot).
        grant = rules.grants.get(msg.tool) or rules.grant_for(msg.tool)  # the helper refuses
        size = rules.check_invoke(msg.rid, grant, msg.payload)
        rules.admit_invoke(Call(msg.rid, grant, msg.idempotency_key, size))
        return InvokeReceived(
            msg.rid,
            msg.tool,
            msg.payload.value,
            msg.attempt,
            msg.idempotency_key,
            msg.deadline_ms,
            msg.journal_key,
        )

    def _on_cancel(self, rules: SessionRules[Call], msg: Cancel) -> CancelReceived:
        rules.check_fresh_id(msg.cid)
        call = rules.in_flight.get(msg.rid)
        if call is not None:
            if msg.tool != call.tool:
                raise CancelMismatch(f"cancel names {msg.tool!r}, {msg.rid!r} is {call.tool!r}")
            if call.cid is not None:
                raise CancelRepeated(f"{msg.rid!r} was already cancelled")
            rules.ids.add(msg.cid)
            call.cid = msg.cid
            call.cancel = CANCEL_REQUESTED
            return CancelReceived(msg.cid, msg.rid, msg.tool, finished=False)
        done = self._finished.get(msg.rid)
        if done is None:
            raise UnknownRequest(f"cancel for {msg.rid!r}, which this session never ran")
        if msg.tool != done.tool:
            raise CancelMismatch(f"cancel names tool {msg.tool!r}, {msg.rid!r} was {done.tool!r}")
        if done.cancel_seen:
            raise CancelRepeated(f"{msg.rid!r} was already cancelled")
        rules.ids.add(msg.cid)
        self._finished[msg.rid] = done._replace(cancel_seen=True)
        self._owed_too_late[msg.cid] = (msg.rid, done.tool)
        return CancelReceived(msg.cid, msg.rid, msg.tool, finished=True)

    # -- producing: each returns the exact bytes to write --------------------------------

    def ready(self, impl: str, version: str) -> bytes:
        """The answer to `open`: describes every granted tool."""
        self._check_usable()
        if self._rules is None or self._ready_sent:
            raise Refused("unexpected_ready", "ready answers open, once")
        tools = [self._served[tool] for tool in self._rules.grants]
        line = self._sealer.seal(Ready, tools=tools, impl=impl, version=version)
        self._ready_sent = True
        return line

    def chunk(self, rid: str, text: str) -> bytes | None:
        """A chunk of ``rid``, or None (nothing sent) if the stream grant does not allow it."""
        self._check_usable()
        rules = self._rules
        call = rules.in_flight.get(rid) if rules is not None else None
        if rules is None or call is None or not self._ready_sent:
            return None
        try:
            size = rules.check_chunk(call, text)
        except StateViolation:
            return None
        try:
            line = self._sealer.seal(Chunk, rid, call.chunks + 1, text)  # rid, index, text
        except Refused:
            return None
        rules.admit_chunk(call, size)
        return line

    def result(self, rid: str, value: Any) -> bytes:
        """The terminal success of ``rid`` (plus ``too_late`` if a cancel is pending).

        Raises `Refused` (code ``output_too_large``, ``format_mismatch``,
        ``payload_too_deep``) if the output breaks the grant: send an `error` instead.
        """
        call = self._terminal_call(rid)
        grant = call.grant
        try:
            payload = make_payload(value, grant.format, "result")
            size = check_payload(
                payload, grant.format, grant.max_output_bytes, OutputTooLarge, "result"
            )
        except StateViolation as exc:
            raise Refused.because(exc) from None
        try:
            line = self._sealer.seal(Result, rid, payload)  # rid, payload
        except Refused as exc:
            raise Refused("output_too_large", str(exc)) from None
        return self._finish(call, line, Succeeded(payload), size)

    def error(self, rid: str, code: str, message: str, retryable: bool = False) -> bytes:
        """The terminal failure of ``rid`` (plus ``too_late`` if a cancel is pending)."""
        call = self._terminal_call(rid)
        if not is_id(code):
            raise Refused("bad_id", "error code must be 1..128 bytes of [a-z0-9._-]")
        message = clip_message(message)
        line = self._sealer.seal(
            Error, rid=rid, code=code, message=message, retryable=bool(retryable)
        )
        return self._finish(call, line, Failed(message), len(message))

    def acknowledge(self, rid: str) -> bytes:
        """``cancel_result: acknowledged``: terminal; valid only with a pending cancel."""
        call = self._terminal_call(rid)
        if call.cancel != CANCEL_REQUESTED or call.cid is None:
            raise Refused("not_cancelled", f"{rid!r} has no pending cancel to acknowledge")
        line = self._sealer.seal(
            CancelResult, cid=call.cid, rid=rid, tool=call.tool, outcome="acknowledged"
        )
        self._end(call, cancel_seen=True)
        self._remember(call.tool, call.idempotency_key, CancelledState(), 0)
        return line

    def unsupported(self, rid: str) -> bytes:
        """``cancel_result: unsupported``: the call runs on and ends normally later."""
        call = self._terminal_call(rid)
        if call.cancel != CANCEL_REQUESTED or call.cid is None:
            raise Refused("not_cancelled", f"{rid!r} has no pending cancel")
        line = self._sealer.seal(
            CancelResult, cid=call.cid, rid=rid, tool=call.tool, outcome="unsupported"
        )
        call.cancel = CANCEL_UNSUPPORTED
        return line

    def too_late(self, cid: str) -> bytes:
        """``cancel_result: too_late`` for a cancel that arrived after its call ended."""
        self._check_usable()
        owed = self._owed_too_late.get(cid)
        if owed is None:
            raise Refused("not_owed", f"no too_late is owed for {cid!r}")
        rid, tool = owed
        line = self._sealer.seal(CancelResult, cid=cid, rid=rid, tool=tool, outcome="too_late")
        del self._owed_too_late[cid]
        return line

    def reconciled(self, rid: str, journal: list[SignedEntry] | None = None) -> bytes:
        """The answer to a `reconcile`: from what this session remembers, or, for an
        effectful tool, from ``journal`` (the entries the worker's journal holds for the
        key, section 11), which it relays with the status they stand for."""
        self._check_usable()
        asked = self._owed_reconciles.get(rid)
        if asked is None:
            raise Refused("not_owed", f"no reconcile {rid!r} is pending")
        tool, key = asked
        running = self._rules is not None and any(
            c.tool == tool and c.idempotency_key == key for c in self._rules.in_flight.values()
        )
        entries = None
        fallback: Status = UnknownState()
        if journal is not None:
            entries = (journal[:1] if running else journal[:2]) or None
            status = Running() if running else relayed_status(journal)
            fallback = Running() if entries else UnknownState()
        else:
            remembered = self._memory.get(asked)
            status = UnknownState() if remembered is None else remembered[0]
            if running:
                status = Running()
        try:
            line = self._sealer.seal(
                Reconciled, rid=rid, tool=tool, operation_key=key, status=status, journal=entries
            )
        except Refused:  # what it holds no longer fits a frame: it proves nothing
            line = self._sealer.seal(
                Reconciled, rid=rid, tool=tool, operation_key=key, status=fallback
            )
        del self._owed_reconciles[rid]
        return line

    def pong(self, nonce: str) -> bytes:
        """The answer to a `ping`."""
        self._check_usable()
        if nonce not in self._owed_pongs:
            raise Refused("not_owed", f"no ping {nonce!r} is pending")
        line = self._sealer.seal(Pong, nonce=nonce)
        self._owed_pongs.remove(nonce)
        return line

    # -- internals -----------------------------------------------------------------------

    def _terminal_call(self, rid: str) -> Call:
        if self._dead is not None:
            self._check_usable()
        call = self._rules.in_flight.get(rid) if self._rules else None
        if call is None:
            raise Refused("not_in_flight", f"{rid!r} is not in flight")
        return call

    def _finish(self, call: Call, line: bytes, status: Status, size: int) -> bytes:
        """Retire a call after its result/error; append ``too_late`` if a cancel waits."""
        if call.cancel == CANCEL_REQUESTED and call.cid is not None:
            line += self._sealer.seal(
                CancelResult, cid=call.cid, rid=call.rid, tool=call.tool, outcome="too_late"
            )
        self._end(call, cancel_seen=call.cancel != NOT_CANCELLED)
        self._remember(call.tool, call.idempotency_key, status, size)
        return line

    def _end(self, call: Call, cancel_seen: bool) -> None:
        assert self._rules is not None
        del self._rules.in_flight[call.rid]
        self._finished[call.rid] = _Finished(call.tool, cancel_seen)

    def _remember(self, tool: str, key: str, status: Status, size: int) -> None:
        """Record the latest state of an operation for `reconcile` (bounded)."""
        slot = (tool, key)
        memory = self._memory
        old = memory.pop(slot, None)
        if old is not None:
            self._memory_bytes -= old[1]
        if size > MAX_LINE_BYTES:
            return  # could never be answered in one frame: forget it (answers unknown)
        memory[slot] = (status, size)
        self._memory_bytes += size
        while len(memory) > RECONCILE_MEMORY or self._memory_bytes > RECONCILE_MEMORY_BYTES:
            _, (_, dropped) = memory.popitem(last=False)
            self._memory_bytes -= dropped


def _kind(msg: HostMessage) -> str:
    return type(msg).__name__.lower()
