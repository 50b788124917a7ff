"""The values the ledger hands out: invocations, outcomes, chunks, reconcile statuses.

They are frozen msgspec Structs: cheap to build on the hot path and safe to pass on.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

import msgspec

from supervisor.ledger.errors import PolicyError
from supervisor.ledger.policy import PayloadFormat, StreamPolicy

#: The longest failure message kept (protocol.md's error message bound).
MAX_MESSAGE_BYTES = 4096


class OperationState(StrEnum):
    """Where an operation is in its one lifecycle (reference-splash.md 8.1)."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    CANCELLATION_REQUESTED = "cancellation_requested"
    RESOLVED = "resolved"


# -- terminal outcomes ------------------------------------------------------------------
# ``kind`` is the ledger's own name (and the audit event kind); ``status`` is what the
# supervisor reports in its `Outcome.status` (supervisor.workers.outcome).


class Completed(msgspec.Struct, frozen=True):
    """The worker's result, validated against the tool's format, size and contract."""

    value: Any
    kind: ClassVar[str] = "completed"
    status: ClassVar[str] = "completed"


class Failed(msgspec.Struct, frozen=True):
    """The worker (or the host's failure policy) reported a failure."""

    message: str
    kind: ClassVar[str] = "failed"
    status: ClassVar[str] = "failed"


class Denied(msgspec.Struct, frozen=True):
    """A result arrived but broke the tool's output rules; ``reason`` says which."""

    reason: str
    kind: ClassVar[str] = "denied"
    status: ClassVar[str] = "failed"


class Cancelled(msgspec.Struct, frozen=True):
    """``reason``: ``confirmed`` (acknowledged), ``asserted`` (trusted host assertion),
    ``before_dispatch`` (never claimed) or ``reconciled`` (worker reported it)."""

    reason: str
    kind: ClassVar[str] = "cancelled"
    status: ClassVar[str] = "cancelled"


class TimedOut(msgspec.Struct, frozen=True):
    """``reason``: ``expired`` (the expiry tick) or ``late_<what>`` (arrived after the
    deadline, which wins)."""

    reason: str
    kind: ClassVar[str] = "timed_out"
    status: ClassVar[str] = "timed_out"


LedgerOutcome = Completed | Failed | Denied | Cancelled | TimedOut


# -- what the host gets back from transitions ---------------------------------------------


class Invocation(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatch of a claimed operation: everything a worker request needs.

    ``id`` is the host-local opaque id and never goes on the wire; the worker sees
    ``idempotency_key``, identical for every attempt of this operation.
    """

    id: int
    tool: str
    value: Any
    format: PayloadFormat
    call_index: int
    attempt: int
    max_attempts: int
    idempotency_key: str
    stream: StreamPolicy | None
    max_output_bytes: int
    remaining_deadline_ms: int | None


class CancellationTicket(msgspec.Struct, frozen=True, kw_only=True):
    """What ``request_cancellation`` returns: the binding to check against the worker's
    acknowledgement (no input). Correlation data, not proof that anything stopped."""

    id: int
    tool: str
    call_index: int
    attempt: int
    idempotency_key: str


class StreamChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk released to the host: ``text`` is the redactor's output, never the source."""

    id: int
    index: int
    text: str
    source_bytes: int
    emitted_bytes: int


class OperationInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one operation, for listings and reconciliation."""

    id: int
    tool: str
    state: OperationState
    call_index: int
    attempt: int
    max_attempts: int
    idempotency_key: str
    indeterminate: bool
    chunks: int
    source_bytes: int
    emitted_bytes: int
    remaining_deadline_ms: int | None
    outcome: LedgerOutcome | None


# -- reconciliation -----------------------------------------------------------------------

ReconcileState = Literal["running", "succeeded", "failed", "cancelled", "unknown"]


class ReconcileStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A worker's authenticated ``reconciled`` status, already verified by the transport.

    Build it with the class methods; the constructor checks that the fields fit the state.
    """

    state: ReconcileState
    value: Any = None
    format: PayloadFormat | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.state == "succeeded":
            if self.format not in ("text", "json"):
                raise PolicyError("a succeeded status needs format 'text' or 'json'")
            if self.message is not None:
                raise PolicyError("a succeeded status carries a value, not a message")
        elif self.state == "failed":
            if not isinstance(self.message, str) or not self.message:
                raise PolicyError("a failed status needs a non-empty message")
            if len(self.message.encode(errors="surrogatepass")) > MAX_MESSAGE_BYTES:
                raise PolicyError(f"a failed status message is at most {MAX_MESSAGE_BYTES} bytes")
            if self.value is not None or self.format is not None:
                raise PolicyError("a failed status carries a message, not a value")
        elif self.state in ("running", "cancelled", "unknown"):
            if self.value is not None or self.format is not None or self.message is not None:
                raise PolicyError(f"a {self.state} status carries nothing else")
        else:
            raise PolicyError(f"unknown reconcile state {self.state!r}")

    @classmethod
    def running(cls) -> ReconcileStatus:
        return cls(state="running")

    @classmethod
    def succeeded(cls, value: Any, format: PayloadFormat = "text") -> ReconcileStatus:
        return cls(state="succeeded", value=value, format=format)

    @classmethod
    def failed(cls, message: str) -> ReconcileStatus:
        return cls(state="failed", message=message)

    @classmethod
    def cancelled(cls) -> ReconcileStatus:
        return cls(state="cancelled")

    @classmethod
    def unknown(cls) -> ReconcileStatus:
        return cls(state="unknown")


class Compaction(msgspec.Struct, frozen=True):
    """What `Ledger.compact` did. ``checkpoint`` is ``(seq, hash)`` of the last event
    removed, which the journal now starts after (None: never compacted, or in memory):
    keep it elsewhere to anchor what was removed (see docs/ledger.md)."""

    checkpoint: tuple[int, str] | None
    events_removed: int
    operations_removed: int
    #: ``(tool, idempotency_key)`` of each operation removed, oldest first (what a
    #: worker's journal of those operations may forget too).
    removed: tuple[tuple[str, str], ...] = ()
