"""The tamper-evident audit trail: one hash-chained event per transition.

Each event's ``hash`` is SHA-256 over a domain string and the canonical (compact JSON
array) encoding of all its other fields, ``prev_hash`` included, so editing, removing or
reordering any event breaks every later link. The trail keeps a bounded ring in memory;
the durable journal keeps every event. A chain with no external anchor cannot reveal a
consistently rewritten tail: a host that needs that records ``head`` elsewhere.

An event nobody reads when it happens (no journal writes it, no subscriber hears it) is
kept as its fields only, and built and hashed when somebody does read the trail (its
``head``, its ``events``) or records an event somebody hears: the chain is the same one,
event for event, and a call's hot path does not pay for a hash nobody looks at.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, cast

import msgspec

from supervisor.ledger.errors import AuditChainBroken, PolicyError

GENESIS_HASH = "0" * 64
DEFAULT_RING = 1024
MAX_RING = 8192
#: Unread events kept as fields before they are chained anyway (bounds their memory).
MAX_UNCHAINED = 4096
_DOMAIN = b"sandvisor/ledger/audit/v1\n"
_encode = msgspec.json.Encoder().encode
_sha256 = hashlib.sha256


class AuditKind(StrEnum):
    """What an event records. The last five are terminal: exactly one per operation."""

    STARTED = "started"
    CLAIMED = "claimed"
    RETRY_SCHEDULED = "retry_scheduled"
    STREAMED = "streamed"
    STREAM_DENIED = "stream_denied"
    CANCELLATION_REQUESTED = "cancellation_requested"
    INDETERMINATE = "indeterminate"
    RECOVERED_INDETERMINATE = "recovered_indeterminate"
    RECONCILE_OBSERVED = "reconcile_observed"
    #: A local tool call of a script (run in the host, no operation: ``op_id`` 0).
    LOCAL_CALL = "local_call"
    COMPLETED = "completed"
    DENIED = "denied"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


#: The prefix of a local tool's call counter among the ledger's per-tool counters (a
#: ledger tool's id never holds a colon, so the two never meet).
LOCAL_CALLS = "local:"

TERMINAL_KINDS = frozenset(
    {
        AuditKind.COMPLETED,
        AuditKind.DENIED,
        AuditKind.FAILED,
        AuditKind.CANCELLED,
        AuditKind.TIMED_OUT,
    }
)


class AuditEvent(msgspec.Struct, frozen=True):
    """One transition. ``time`` is wall-clock seconds; ``bytes_in``/``bytes_out`` are the
    input/source and output/emitted sizes; ``digest`` is the SHA-256 of the journaled
    payload the event vouches for (the operation's row on ``started``, the result on
    ``completed``/``failed``), so the journal's payloads are covered by the chain too."""

    seq: int
    time: float
    op_id: int
    tool: str
    call_index: int
    attempt: int
    kind: str
    bytes_in: int
    bytes_out: int
    detail: str
    digest: str | None
    prev_hash: str
    hash: str

    def fields(self) -> tuple[int, float, int, str, int, int, str, int, int, str, str | None, str]:
        """Everything the hash covers, in canonical order."""
        return (
            self.seq,
            self.time,
            self.op_id,
            self.tool,
            self.call_index,
            self.attempt,
            self.kind,
            self.bytes_in,
            self.bytes_out,
            self.detail,
            self.digest,
            self.prev_hash,
        )


def event_hash(fields: tuple[object, ...]) -> str:
    return _sha256(_DOMAIN + _encode(fields)).hexdigest()


def verify_chain(
    events: Iterable[AuditEvent], *, prev_hash: str = GENESIS_HASH, first_seq: int = 1
) -> tuple[int, str]:
    """Check that ``events`` hash correctly and link from ``prev_hash`` with consecutive
    sequence numbers from ``first_seq``. Returns ``(count, head hash)``; raises
    ``AuditChainBroken`` at the first bad event."""
    expected_seq = first_seq
    count = 0
    for event in events:
        if event.seq != expected_seq:
            raise AuditChainBroken(
                f"audit event {event.seq} found where {expected_seq} was expected "
                f"(events removed or reordered)",
                seq=event.seq,
            )
        if event.prev_hash != prev_hash:
            raise AuditChainBroken(
                f"audit event {event.seq} does not link to its predecessor", seq=event.seq
            )
        if event_hash(event.fields()) != event.hash:
            raise AuditChainBroken(
                f"audit event {event.seq} does not match its hash (edited)", seq=event.seq
            )
        prev_hash = event.hash
        expected_seq += 1
        count += 1
    return count, prev_hash


AuditSubscriber = Callable[[AuditEvent], None]
#: An event's fields but ``seq``, ``prev_hash`` and ``hash``, which follow from its place
#: in the chain: ``time``, ``op_id``, ``tool``, ``call_index``, ``attempt``, ``kind``,
#: ``bytes_in``, ``bytes_out``, ``detail``, ``digest``.
EventBody = tuple[float, int, str, int, int, str, int, int, str, str | None]
#: The places of one body in the trail's flat list of deferred events.
_BODY_FIELDS = 10


class AuditTrail:
    """The chain head, the in-memory ring and the subscribers.

    ``record`` persists an event before it chains it, so a transition whose journal write
    fails leaves the chain untouched. ``seq`` counts every event recorded; ``head`` (the
    newest event's hash) and ``events`` chain what was deferred first.
    """

    __slots__ = ("_chained", "_head", "_ring", "_unchained", "seq", "subscribers")

    def __init__(self, capacity: int = DEFAULT_RING) -> None:
        if type(capacity) is not int or not 1 <= capacity <= MAX_RING:
            raise PolicyError(f"audit_capacity must be 1..{MAX_RING}, got {capacity!r}")
        self._ring: deque[AuditEvent] = deque(maxlen=capacity)
        self.subscribers: list[AuditSubscriber] = []
        self.seq = 0
        self._head = GENESIS_HASH
        self._chained = 0  # the seq of the newest event built and hashed
        #: The bodies of events recorded but not built yet, oldest first, one flat list:
        #: a tuple kept per event would be the garbage collector's (thousands of them
        #: live for a while, and each collection looks at them and moves them on).
        self._unchained: list[Any] = []

    @property
    def head(self) -> str:
        """The newest event's hash (``GENESIS_HASH`` before the first)."""
        if self._unchained:
            self._chain()
        return self._head

    def restore(self, tail: Iterable[AuditEvent], seq: int, head: str) -> None:
        """Continue a recovered chain: the ring gets its newest events."""
        if self._unchained:
            self._chain()
        self._ring.extend(tail)
        self.seq = self._chained = seq
        self._head = head

    def record(self, body: EventBody, persist: Callable[[AuditEvent], None] | None) -> AuditEvent:
        """Chain the next event. ``persist`` (the journal write) runs first: if it raises,
        the chain is left as it was."""
        if self._unchained:
            self._chain()
        seq = self.seq + 1
        fields = (seq, *body, self._head)
        event = AuditEvent(*fields, _sha256(_DOMAIN + _encode(fields)).hexdigest())
        if persist is not None:
            persist(event)
        self._ring.append(event)
        self.seq = self._chained = seq
        self._head = event.hash
        return event

    def note(
        self, body: EventBody, persist: Callable[[AuditEvent], None] | None
    ) -> AuditEvent | None:
        """`record`, or, when nothing persists the event and nobody subscribes, keep its
        fields to chain when the trail is read (None then: there is no event yet)."""
        if persist is not None or self.subscribers:
            return self.record(body, persist)
        self._unchained += body
        self.seq = seq = self.seq + 1
        if seq - self._chained >= MAX_UNCHAINED:
            self._chain()
        return None

    def _chain(self) -> None:
        """Build and hash the deferred events in order; only the ring's share of them is
        kept as `AuditEvent` objects (the older ones would leave the ring at once)."""
        unchained, self._unchained = self._unchained, []
        count = len(unchained) // _BODY_FIELDS
        seq = self.seq - count
        prev = self._head
        ring = self._ring
        keep_from = count - (ring.maxlen or count)
        for index in range(count):
            seq += 1
            start = index * _BODY_FIELDS
            body = cast(EventBody, unchained[start : start + _BODY_FIELDS])  # its ten fields
            fields = (seq, *body, prev)
            hashed = _sha256(_DOMAIN + _encode(fields)).hexdigest()
            if index >= keep_from:
                ring.append(AuditEvent(*fields, hashed))
            prev = hashed
        self._head = prev
        self._chained = seq

    def notify(self, event: AuditEvent) -> None:
        for subscriber in tuple(self.subscribers):  # one may unsubscribe while notified
            subscriber(event)

    def subscribe(self, subscriber: AuditSubscriber) -> Callable[[], None]:
        self.subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self.subscribers:
                self.subscribers.remove(subscriber)

        return unsubscribe

    def events(self) -> tuple[AuditEvent, ...]:
        if self._unchained:
            self._chain()
        return tuple(self._ring)
