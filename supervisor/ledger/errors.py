"""The ledger's one family of errors.

Every refusal is a ``LedgerError`` subclass that says what was refused and why. A refused
call changes nothing, except where the transition table says the refusal is itself audited
(a denied stream chunk records ``stream_denied``).
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error the ledger raises. ``op_id`` names the operation, if any."""

    def __init__(self, message: str, *, op_id: int | None = None) -> None:
        super().__init__(message)
        self.op_id = op_id


# -- the names fixed by the issue -------------------------------------------------------


class NotClaimed(LedgerError):
    """The operation is still queued: it was never dispatched."""


class RetryLimitReached(LedgerError):
    """``attempt == max_attempts``: the host must complete, fail or cancel it instead."""


class DeadlineElapsed(LedgerError):
    """The operation's deadline has passed; ``expire_timed_out()`` will resolve it."""


class CancellationRequested(LedgerError):
    """Cancellation was requested: no retry, no more chunks until it is resolved."""


class CancellationNotRequested(LedgerError):
    """``confirm_cancellation`` without a prior ``request_cancellation``."""


class AlreadyCompleted(LedgerError):
    """The operation already reached its terminal state."""


class StreamLimitExceeded(LedgerError):
    """A chunk would break the stream policy: backpressure, never retry the same chunk."""


class StreamingDisabled(LedgerError):
    """The tool has no stream policy."""


class AlreadyReserved(LedgerError):
    """The tool has been started or claimed already, so its redactor can no longer change."""


class PendingLimitReached(LedgerError):
    """``max_pending`` operations are already queued or in flight."""


class InvalidOutput(LedgerError):
    """A reconciled payload whose format differs from the tool's, or malformed chunk text."""


# -- further refusals ---------------------------------------------------------------------


class PolicyError(LedgerError, ValueError):
    """A policy, limit or nonce is malformed; raised at construction or registration."""


class UnknownTool(LedgerError):
    """No tool of that name is registered in this ledger (after a restart: not yet again)."""


class AlreadyRegistered(LedgerError):
    """A tool of that name is registered already."""


class UnknownOperation(LedgerError):
    """No operation with that id was ever started in this ledger."""


class AlreadyClaimed(LedgerError):
    """An exact claim of an operation that is claimed already."""


class CallBudgetExhausted(LedgerError):
    """The tool's ``max_calls`` starts have been spent."""


class InvalidInput(LedgerError):
    """The input breaks the tool's format, depth or size limits."""


class EntropyUnavailable(LedgerError):
    """No OS entropy and no host nonce: idempotency keys cannot be made, so no external tool."""


class OperationIndeterminate(LedgerError):
    """The outcome is unknown (the worker session died): reconcile, fail, cancel or expire."""


class RedactorFailed(LedgerError):
    """The stream redactor raised or returned something other than a string."""


class JournalError(LedgerError):
    """The durable journal cannot be used."""


class JournalLocked(JournalError):
    """Another ledger holds the journal open."""


class JournalCorrupt(JournalError):
    """The journal is not a ledger journal, or its contents contradict its audit chain."""


class AuditChainBroken(JournalCorrupt):
    """An audit event does not hash to its recorded value or does not link to its parent."""

    def __init__(self, message: str, *, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class JournalFailed(JournalError):
    """A journal write failed. Memory and disk may disagree, so the ledger refuses all
    further transitions; reopen the journal to recover."""
