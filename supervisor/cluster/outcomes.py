"""Outcomes a node did not hand back itself: a node lost under a call, and a ledger's
verdict read later by idempotency key."""

from __future__ import annotations

from supervisor.ledger import Cancelled, Completed, Denied, Failed, LedgerOutcome, TimedOut
from supervisor.workers.outcome import Outcome, Status

#: The kill reason of a call whose node (its actor, its process or its machine) was lost.
NODE_LOST = "node_lost"


def node_lost(tool: str, idempotency_key: str, detail: str) -> Outcome:
    """``indeterminate``: the call may or may not have run; never retried. Its node's
    durable ledger keeps it, and the outcome can be asked for later by key."""
    return Outcome(
        status="indeterminate",
        tool=tool,
        error=f"the outcome is unknown: the node was lost ({detail})",
        error_code="indeterminate",
        kill_reason=NODE_LOST,
        idempotency_key=idempotency_key,
    )


def undispatched(tool: str, idempotency_key: str, status: Status, error: str) -> Outcome:
    """A call that never reached a node: cancelled meanwhile, out of time (``timed_out``),
    or no node's actor was ready for it (``failed``, ``no_worker``, as when no worker of a
    supervisor frees up in time)."""
    codes = {"timed_out": "deadline", "failed": "no_worker"}
    return Outcome(
        status=status,
        tool=tool,
        error=error,
        error_code=codes.get(status),
        idempotency_key=idempotency_key,
    )


def from_ledger(
    tool: str, op_id: int, idempotency_key: str, outcome: LedgerOutcome | None
) -> Outcome:
    """A node ledger's verdict on an operation (None: still pending, so indeterminate)."""
    value = error = error_code = None
    status: Status
    if outcome is None:
        status, error_code = "indeterminate", "indeterminate"
        error = "the outcome is unknown: not reconciled or expired yet"
    elif isinstance(outcome, Completed):
        status, value = "completed", outcome.value
    elif isinstance(outcome, Denied):
        status, error, error_code = "failed", outcome.reason, "denied"
    elif isinstance(outcome, Failed):
        status, error = "failed", outcome.message
    elif isinstance(outcome, TimedOut):
        status, error_code = "timed_out", "deadline"
        error = f"the deadline passed ({outcome.reason})"
    else:
        assert isinstance(outcome, Cancelled)
        status, error = "cancelled", f"cancelled ({outcome.reason})"
    return Outcome(
        status=status,
        tool=tool,
        value=value,
        error=error,
        error_code=error_code,
        op_id=op_id,
        idempotency_key=idempotency_key,
    )
