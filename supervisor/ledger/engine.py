"""``LedgerEngine``: the machinery under ``Ledger``'s public transitions.

State, the one place every transition is chained and journaled (``_record_op``: the event
is written, and committed unless batching, before memory changes), batching, the poison
that follows a failed write, the ways an operation resolves, and recovery on open.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from os import PathLike
from typing import TYPE_CHECKING, Any, TypeVar

from supervisor.ledger import payloads
from supervisor.ledger.audit import (
    AuditEvent,
    AuditKind,
    AuditTrail,
)
from supervisor.ledger.errors import (
    AlreadyCompleted,
    CancellationRequested,
    JournalError,
    JournalFailed,
    NotClaimed,
    OperationIndeterminate,
    PolicyError,
    UnknownOperation,
    UnknownTool,
)
from supervisor.ledger.idempotency import SessionNonce
from supervisor.ledger.operation import Operation
from supervisor.ledger.policy import ToolPolicy
from supervisor.ledger.records import OpRecord, result_digest
from supervisor.ledger.types import (
    MAX_MESSAGE_BYTES,
    Cancelled,
    Compaction,
    Completed,
    Denied,
    Failed,
    Invocation,
    LedgerOutcome,
    OperationInfo,
    OperationState,
    TimedOut,
)

if TYPE_CHECKING:
    import anyio

    from supervisor.ledger.journal import SqliteJournal

_Q = OperationState.QUEUED
_C = OperationState.CLAIMED
_CR = OperationState.CANCELLATION_REQUESTED
_R = OperationState.RESOLVED
_DETAIL_CHARS = 256
T = TypeVar("T")

Redactor = Callable[[str], str]


class _Tool:
    __slots__ = ("contract", "policy", "redactor", "reserved")

    def __init__(self, policy: ToolPolicy, contract: payloads.Contract | None) -> None:
        self.policy = policy
        self.contract = contract
        self.redactor: Redactor | None = None
        self.reserved = False  # started or claimed here: the redactor is fixed


class _Waiter:
    __slots__ = ("event", "failure", "outcome")

    def __init__(self, event: anyio.Event) -> None:
        self.event = event
        self.outcome: LedgerOutcome | None = None
        self.failure: str | None = None


def _truncate(text: str, limit: int) -> str:
    """At most ``limit`` UTF-8 bytes of ``text``, cut on a character boundary."""
    data = text.encode(errors="replace")
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


class LedgerEngine:
    """State and internals shared by every transition (see ``Ledger``)."""

    def __init__(
        self,
        max_pending: int = 64,
        path: str | PathLike[str] | None = None,
        *,
        session_nonce: SessionNonce | bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        audit_capacity: int = 1024,
        retain_outcomes: int = 1024,
    ) -> None:
        if type(max_pending) is not int or max_pending <= 0:
            raise PolicyError(f"max_pending must be a positive integer, got {max_pending!r}")
        if type(retain_outcomes) is not int or retain_outcomes <= 0:
            raise PolicyError("retain_outcomes must be a positive integer")
        if isinstance(session_nonce, bytes):
            session_nonce = SessionNonce(session_nonce)
        self._nonce = session_nonce
        self._key_prefix: str | None = None
        self._max_pending = max_pending
        self._retain = retain_outcomes
        self._clock = clock
        self._wall = wall_clock
        self._trail = AuditTrail(audit_capacity)
        self._subscribers = self._trail.subscribers
        self._compaction_subscribers: list[Callable[[Compaction], None]] = []
        self._tools: dict[str, _Tool] = {}
        self._calls: dict[str, int] = {}
        self._live: dict[int, Operation] = {}
        self._local_in_flight = 0  # local calls of scripts between begin and end
        # Claim order. Entries that left the queued state are skipped, and dropped when
        # they reach the front or when they outnumber the queued ones.
        self._queue: deque[Operation] = deque()
        self._queued = 0
        self._deadlines: list[tuple[float, int]] = []
        self._retained: OrderedDict[int, Operation] = OrderedDict()
        self._waiters: dict[int, _Waiter] = {}
        self._next_id = 1
        self._batch_depth = 0
        self._deferred: list[Callable[[], None]] = []
        self._unusable: str | None = None
        self._journal: SqliteJournal | None = None
        if path is not None:
            from supervisor.ledger.journal import SqliteJournal

            self._journal = SqliteJournal(path)
            try:
                self._recover(self._journal, audit_capacity)
            except BaseException:
                self._journal.close()
                raise

    def _compact_deadlines(self) -> None:
        """Resolved operations leave their heap entries behind; drop them in bulk."""
        live = self._live
        self._deadlines = [entry for entry in self._deadlines if entry[1] in live]
        heapq.heapify(self._deadlines)

    def _compact_queue(self) -> None:
        """Claimed or resolved entries that are not at the front pile up; drop them."""
        self._queue = deque(op for op in self._queue if op.state is _Q)

    def _claim(self, op: Operation, now: float | None) -> Invocation:
        event = self._record_op(op, AuditKind.CLAIMED, 1)
        self._queued -= 1
        op.state = _C
        op.attempt = 1
        self._tools[op.tool].reserved = True
        if self._subscribers:
            self._publish(event)
        return self._invocation(op, now)

    # -- batching -----------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group transitions into one journal transaction, committed when the block exits.

        Waiters and audit subscribers hear of them only then. Do not act on anything the
        block returns (dispatch a claim, report a result) until it has exited.
        """
        self._check_usable()
        journal = self._journal
        if self._batch_depth == 0 and journal is not None:
            self._guard(journal.begin)
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0:
                deferred, self._deferred = self._deferred, []
                if self._unusable is None:
                    if journal is not None:
                        self._guard(journal.commit)
                    for notify in deferred:
                        notify()

    # -- internals ------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._unusable is not None:
            raise JournalFailed(f"the ledger refuses transitions: {self._unusable}")

    def _guard(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except JournalFailed as exc:
            self._poison(str(exc))
            raise

    def _poison(self, why: str) -> None:
        """Memory may now be ahead of the journal: stop, and release every waiter."""
        self._unusable = f"{why}; reopen the journal to recover"
        self._deferred.clear()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.failure = self._unusable
            waiter.event.set()

    def _record_op(
        self,
        op: Operation,
        kind: str,
        attempt: int,
        bytes_in: int = 0,
        bytes_out: int = 0,
        detail: str = "",
        digest: str | None = None,
        terminal: tuple[str, bytes | None] | None = None,
    ) -> AuditEvent | None:
        """Chain (and journal: committed unless batching) one event of ``op``; None when
        nobody reads it now (no journal, no subscriber): the trail chains it when read."""
        if self._unusable is not None:
            self._check_usable()
        persist = None if self._journal is None else self._persist(None, terminal)
        wall = self._wall()
        body = (
            wall,
            op.id,
            op.tool,
            op.call_index,
            attempt,
            kind,
            bytes_in,
            bytes_out,
            detail,
            digest,
        )
        return self._trail.note(body, persist)

    def _persist(
        self, record: OpRecord | None, terminal: tuple[str, bytes | None] | None
    ) -> Callable[[AuditEvent], None]:
        journal = self._journal
        assert journal is not None

        def write(event: AuditEvent) -> None:
            self._guard(lambda: journal.write(event, record, terminal))

        return write

    def _publish(self, event: AuditEvent | None) -> None:
        """Tell the subscribers (there is an event whenever there are subscribers)."""
        if event is None:
            return
        if self._batch_depth:
            self._deferred.append(lambda: self._trail.notify(event))
        else:
            self._trail.notify(event)

    def _live_op(self, op_id: int) -> Operation:
        op = self._live.get(op_id)
        if op is None:
            raise self._gone(op_id, "it has ended")
        return op

    def _dispatched(self, op_id: int, *, allow_cancel_requested: bool) -> Operation:
        op = self._live.get(op_id)
        if op is None:
            raise self._gone(op_id, "it has ended")
        if op.state is _Q:
            raise NotClaimed(f"operation {op_id} is queued, not claimed", op_id=op_id)
        if op.state is _CR and not allow_cancel_requested:
            raise CancellationRequested(
                f"operation {op_id}: cancellation was requested", op_id=op_id
            )
        return op

    def _gone(self, op_id: object, why: str) -> Exception:
        if type(op_id) is int and 0 < op_id < self._next_id:
            return AlreadyCompleted(f"operation {op_id}: {why}", op_id=op_id)
        return UnknownOperation(f"no operation {op_id!r} in this ledger")

    def _entry(self, op: Operation) -> _Tool:
        entry = self._tools.get(op.tool)
        if entry is None:
            raise UnknownTool(
                f"operation {op.id}: tool {op.tool!r} is not registered in this ledger; after a "
                f"restart, register it again (policy, redactor, contract) first",
                op_id=op.id,
            )
        return entry

    def _refuse_indeterminate(self, op: Operation, what: str) -> None:
        if op.indeterminate:
            raise OperationIndeterminate(
                f"operation {op.id} is indeterminate and cannot be {what}", op_id=op.id
            )

    def _late(self, op: Operation) -> bool:
        return op.deadline_at is not None and self._clock() >= op.deadline_at

    def _remaining_ms(self, op: Operation, now: float | None) -> int | None:
        if op.deadline_at is None:
            return None
        if now is None:
            now = self._clock()
        return max(0, math.ceil((op.deadline_at - now) * 1000))

    def _invocation(self, op: Operation, now: float | None) -> Invocation:
        return Invocation(
            id=op.id,
            tool=op.tool,
            value=op.value,
            format=op.format,
            call_index=op.call_index,
            attempt=op.attempt,
            max_attempts=op.max_attempts,
            idempotency_key=op.key,
            stream=op.stream,
            max_output_bytes=op.max_output_bytes,
            remaining_deadline_ms=None if op.deadline_at is None else self._remaining_ms(op, now),
        )

    def _info(self, op: Operation, now: float) -> OperationInfo:
        return OperationInfo(
            id=op.id,
            tool=op.tool,
            state=op.state,
            call_index=op.call_index,
            attempt=op.attempt,
            max_attempts=op.max_attempts,
            idempotency_key=op.key,
            indeterminate=op.indeterminate,
            chunks=op.chunks,
            source_bytes=op.source_bytes,
            emitted_bytes=op.emitted_bytes,
            remaining_deadline_ms=None if op.state is _R else self._remaining_ms(op, now),
            outcome=op.outcome,
        )

    # -- resolution -------------------------------------------------------------------

    def _accept(self, op: Operation, entry: _Tool, value: Any) -> LedgerOutcome:
        try:
            # The common case inline; payloads.encode has every rule.
            data = (
                value.encode()
                if op.format == "text" and type(value) is str
                else payloads.encode(op.format, value)
            )
        except (payloads.PayloadError, UnicodeEncodeError) as exc:
            return self._deny(op, payloads.reason(exc), 0)
        size = len(data)
        if size > op.max_output_bytes:
            return self._deny(
                op, f"output is {size} bytes, over max_output_bytes {op.max_output_bytes}", size
            )
        if entry.contract is not None:
            reason = entry.contract(value)
            if reason is not None:
                return self._deny(op, reason, size)
        outcome = Completed(value)
        event = self._record_op(
            op,
            AuditKind.COMPLETED,
            op.attempt,
            0,
            size,
            digest=None if self._journal is None else result_digest(data),
            terminal=(AuditKind.COMPLETED, data),
        )
        return self._resolve(op, outcome, event)

    def _result_digest(self, body: bytes) -> str | None:
        """Only a journaled result needs vouching for (in memory there is no copy)."""
        return None if self._journal is None else result_digest(body)

    def _deny(self, op: Operation, reason: str, size: int) -> LedgerOutcome:
        event = self._record_op(
            op, AuditKind.DENIED, op.attempt, 0, size, reason, terminal=(AuditKind.DENIED, None)
        )
        return self._resolve(op, Denied(reason), event)

    def _fail(self, op: Operation, message: str) -> LedgerOutcome:
        message = _truncate(message, MAX_MESSAGE_BYTES)
        body = message.encode(errors="replace")
        message = body.decode()
        event = self._record_op(
            op,
            AuditKind.FAILED,
            op.attempt,
            0,
            len(body),
            _truncate(message, _DETAIL_CHARS),
            self._result_digest(body),
            (AuditKind.FAILED, body),
        )
        return self._resolve(op, Failed(message), event)

    def _cancel(self, op: Operation, reason: str) -> LedgerOutcome:
        event = self._record_op(
            op, AuditKind.CANCELLED, op.attempt, detail=reason, terminal=(AuditKind.CANCELLED, None)
        )
        return self._resolve(op, Cancelled(reason), event)

    def _time_out(self, op: Operation, reason: str) -> LedgerOutcome:
        event = self._record_op(
            op, AuditKind.TIMED_OUT, op.attempt, detail=reason, terminal=(AuditKind.TIMED_OUT, None)
        )
        return self._resolve(op, TimedOut(reason), event)

    def _resolve(
        self, op: Operation, outcome: LedgerOutcome, event: AuditEvent | None
    ) -> LedgerOutcome:
        op_id = op.id
        if op.state is _Q:
            self._queued -= 1
        op.state = _R
        op.outcome = outcome
        op.value = None  # the input is not needed any more
        del self._live[op_id]
        retained = self._retained
        retained[op_id] = op
        if len(retained) > self._retain:
            retained.popitem(last=False)
        waiter = self._waiters.pop(op_id, None)
        if waiter is not None:
            waiter.outcome = outcome
            if self._batch_depth:
                self._deferred.append(waiter.event.set)
            else:
                waiter.event.set()
        if self._subscribers:
            self._publish(event)
        return outcome

    # -- recovery -----------------------------------------------------------------------

    def _recover(self, journal: SqliteJournal, ring: int) -> None:
        from supervisor.ledger.recovery import replay

        found = replay(journal, ring)
        self._trail.restore(found.tail, found.seq, found.head)
        self._next_id = found.last_op_id + 1
        self._calls = dict(found.calls)
        now, wall = self._clock(), self._wall()
        in_flight: list[Operation] = []
        for record, op in found.live.values():
            op.value = payloads.decode(record.format, record.input)
            if record.deadline_wall is not None:
                op.deadline_at = now + (record.deadline_wall - wall)
                self._deadlines.append((op.deadline_at, op.id))
            self._live[op.id] = op
            if op.state is _Q:
                self._queue.append(op)
                self._queued += 1
            else:
                in_flight.append(op)
        heapq.heapify(self._deadlines)
        # Claimed before the crash: the effect may or may not have happened. Say so in the
        # chain, in one transaction, and never hand them out again.
        with self.batch():
            for op in in_flight:
                self._record_op(
                    op,
                    AuditKind.RECOVERED_INDETERMINATE,
                    op.attempt,
                    detail="the host restarted while it was in flight",
                )
                op.indeterminate = True


def _outcome_of(event: AuditEvent, body: bytes | None, fmt: str) -> LedgerOutcome:
    kind = event.kind
    if kind == AuditKind.COMPLETED and body is not None:
        return Completed(payloads.decode(fmt, body))
    if kind == AuditKind.FAILED and body is not None:
        return Failed(body.decode())
    if kind == AuditKind.DENIED:
        return Denied(event.detail)
    if kind == AuditKind.CANCELLED:
        return Cancelled(event.detail)
    if kind == AuditKind.TIMED_OUT:
        return TimedOut(event.detail)
    raise JournalError(f"operation {event.op_id}: unreadable terminal event {event.seq}")
