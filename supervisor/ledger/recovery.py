"""Rebuild a ledger's state from its journal, trusting nothing the chain does not vouch for.

The events are the source of truth (from the journal's checkpoint on, if it was
compacted): replaying them (in one pass, merged with the records
and results in their own orders) gives every operation's state, attempt, indeterminate
flag and stream counters. On the way, every hash, every link, every digest of a record or
result and every transition is checked against the rules the ledger follows when it
writes; anything else means the file was edited or damaged, and opening fails
(``JournalCorrupt``) rather than recovering wrong state, e.g. re-queuing a claimed
operation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from supervisor.ledger.audit import (
    GENESIS_HASH,
    LOCAL_CALLS,
    TERMINAL_KINDS,
    AuditEvent,
    AuditKind,
    event_hash,
)
from supervisor.ledger.errors import AuditChainBroken, JournalCorrupt
from supervisor.ledger.journal import SqliteJournal
from supervisor.ledger.operation import Operation
from supervisor.ledger.records import OpRecord, result_digest
from supervisor.ledger.types import OperationState

_Q = OperationState.QUEUED
_C = OperationState.CLAIMED
_CR = OperationState.CANCELLATION_REQUESTED
_WITH_BODY = (AuditKind.COMPLETED, AuditKind.FAILED)


class Recovery:
    """What a reopened ledger continues from."""

    def __init__(self, ring: int) -> None:
        self.live: dict[int, tuple[OpRecord, Operation]] = {}
        self.calls: dict[str, int] = {}
        self.seq = 0
        self.head = GENESIS_HASH
        self.last_op_id = 0
        self.tail: deque[AuditEvent] = deque(maxlen=ring)


def _corrupt(event: AuditEvent, why: str) -> JournalCorrupt:
    return JournalCorrupt(
        f"journal event {event.seq} ({event.kind} of operation {event.op_id}): {why}"
    )


def _apply(op: Operation, event: AuditEvent) -> None:
    """One non-``started`` event: check it is a transition the ledger makes, apply it."""
    kind, state = event.kind, op.state
    if kind == AuditKind.CLAIMED:
        if state is not _Q or event.attempt != 1:
            raise _corrupt(event, f"claim of an operation that is {state}")
        op.state, op.attempt = _C, 1
        return
    if kind == AuditKind.RETRY_SCHEDULED:
        if (
            state is not _C
            or op.indeterminate
            or event.attempt != op.attempt + 1
            or event.attempt > op.max_attempts
        ):
            raise _corrupt(event, "retry that the ledger would have refused")
        op.attempt = event.attempt
        return
    if event.attempt != op.attempt:
        raise _corrupt(event, f"attempt {event.attempt}, the operation is at {op.attempt}")
    if kind in TERMINAL_KINDS:
        if state is _Q and kind not in (AuditKind.CANCELLED, AuditKind.TIMED_OUT):
            raise _corrupt(event, "a result for an operation never claimed")
        op.state = OperationState.RESOLVED
        return
    if state is _Q:
        raise _corrupt(event, "event for an operation never claimed")
    if kind == AuditKind.STREAMED:
        if state is not _C or op.indeterminate or event.detail != str(op.chunks + 1):
            raise _corrupt(event, "chunk the ledger would have refused")
        op.chunks += 1
        op.source_bytes += event.bytes_in
        op.emitted_bytes += event.bytes_out
    elif kind == AuditKind.STREAM_DENIED:
        if state is not _C or op.indeterminate:
            raise _corrupt(event, "chunk denial outside the claimed state")
    elif kind == AuditKind.CANCELLATION_REQUESTED:
        if state is not _C:
            raise _corrupt(event, "repeated cancellation request")
        op.state = _CR
    elif kind == AuditKind.INDETERMINATE:
        if op.indeterminate:
            raise _corrupt(event, "marked indeterminate twice")
        op.indeterminate = True
    elif kind == AuditKind.RECOVERED_INDETERMINATE:
        op.indeterminate = True
    elif kind != AuditKind.RECONCILE_OBSERVED:
        raise _corrupt(event, "unknown event kind")


def _next_terminal(
    terminals: Iterator[tuple[int, int, str, bytes | None]], event: AuditEvent
) -> None:
    row = next(terminals, None)
    if row is None or row[0] != event.seq or row[1] != event.op_id or row[2] != event.kind:
        raise _corrupt(event, "its result row is missing or does not match")
    body = row[3]
    if event.kind in _WITH_BODY:
        if body is None or result_digest(body) != event.digest:
            raise _corrupt(event, "the journaled result does not match the event's digest")
    elif body is not None or event.digest is not None:
        raise _corrupt(event, "a result body where none belongs")


def replay(journal: SqliteJournal, ring: int) -> Recovery:
    """Verify the whole journal and return the state to continue from."""
    out = Recovery(ring)
    records = journal.records()
    terminals = journal.terminals()
    live = out.live
    prev_hash = GENESIS_HASH
    checkpoint = journal.checkpoint()
    if checkpoint is not None:  # compacted: the chain continues from the checkpoint
        out.seq, prev_hash = checkpoint.seq, checkpoint.hash
        out.last_op_id, out.calls = checkpoint.last_op_id, dict(checkpoint.calls)
    for event in journal.events():
        seq = out.seq + 1
        if event.seq != seq or event.prev_hash != prev_hash:
            raise AuditChainBroken(
                f"audit event {event.seq} does not follow event {seq - 1} "
                f"(events removed, reordered or edited)",
                seq=event.seq,
            )
        if event_hash(event.fields()) != event.hash:
            raise AuditChainBroken(
                f"audit event {event.seq} does not match its hash (edited)", seq=event.seq
            )
        prev_hash = event.hash
        out.seq = seq
        out.tail.append(event)
        if event.kind == AuditKind.LOCAL_CALL:
            key = LOCAL_CALLS + event.tool
            if (
                event.op_id != 0
                or event.attempt != 0
                or event.digest is None
                or event.call_index != out.calls.get(key, 0) + 1
            ):
                raise _corrupt(event, "a local call the ledger would not have recorded")
            out.calls[key] = event.call_index
            continue
        if event.kind == AuditKind.STARTED:
            record = next(records, None)
            if record is None or record.op_id != event.op_id or event.op_id <= out.last_op_id:
                raise _corrupt(event, "its operation record is missing or out of order")
            if (
                record.digest() != event.digest
                or record.tool != event.tool
                or (record.call_index != event.call_index or event.attempt != 0)
            ):
                raise _corrupt(event, "the journaled operation does not match its digest")
            calls = out.calls.get(record.tool, 0) + 1
            if record.call_index != calls:
                raise _corrupt(event, f"call index {record.call_index}, expected {calls}")
            out.calls[record.tool] = calls
            out.last_op_id = event.op_id
            live[event.op_id] = (record, Operation.from_record(record))
            continue
        found = live.get(event.op_id)
        if found is None:
            raise _corrupt(event, "no such operation, or it had already ended")
        op = found[1]
        if event.tool != op.tool or event.call_index != op.call_index:
            raise _corrupt(event, "tool or call index differs from the operation's")
        _apply(op, event)
        if event.kind in TERMINAL_KINDS:
            _next_terminal(terminals, event)
            del live[event.op_id]
        elif event.digest is not None:
            raise _corrupt(event, "a digest on an event that vouches for nothing")
    if next(records, None) is not None:
        raise JournalCorrupt("the journal holds an operation record no event started")
    if next(terminals, None) is not None:
        raise JournalCorrupt("the journal holds a result no terminal event recorded")
    out.head = prev_hash
    return out
