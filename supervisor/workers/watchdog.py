"""The per-call watchdog rules (protocol.md section 8), with no clock and no I/O.

A `CallWatch` is armed with its deadline before the call's ``invoke`` is queued, and
judges every terminal event *before* it is exposed (the disarm). The session feeds it
``now`` from the event loop's clock; the rules live here so they can be tested exhaustively:

- a ``result`` or ``error`` authenticated before the deadline is accepted;
- one at or after the deadline is *late*: the call is indeterminate and the session is
  killed and poisoned (the spec allows only ``acknowledged`` to end a call that reached
  its deadline cleanly);
- ``acknowledged`` is ``cancelled`` when a caller asked and the deadline has not passed,
  ``timed_out`` when the watchdog asked or the deadline passed meanwhile;
- a call still running when the deadline passes gets a ``cancel`` and ``grace`` seconds
  to acknowledge; then the sandbox is killed and every call on it is indeterminate.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

EndKind = Literal["result", "error", "cancelled", "timed_out", "indeterminate"]
Verdict = Literal["accept", "late", "cancelled", "timed_out"]
CancelReason = Literal["deadline", "host_cancel", "session_deadline"]

#: Default seconds an adapter whose call passed its deadline has to acknowledge the
#: cancel before its sandbox is killed (sized for deadline to reaped within 50 ms).
DEFAULT_CANCEL_GRACE = 0.015
#: Default seconds for a cancel the caller asked for: no deadline presses, and a kill
#: ends every other call of the sandbox too, so a loaded host gives the adapter longer.
DEFAULT_HOST_CANCEL_GRACE = 0.25


class CallEnd(msgspec.Struct, frozen=True, kw_only=True):
    """How the session ended one call; exactly one per call.

    ``kind``: ``result`` (``value``), ``error`` (``code``, ``message``, ``retryable``),
    ``cancelled``, ``timed_out``, or ``indeterminate`` (``reason`` names the kill).
    ``at`` is the host time of the end.
    """

    kind: EndKind
    at: float
    value: Any = None
    code: str | None = None
    message: str | None = None
    retryable: bool = False
    reason: str | None = None
    output_bytes: int = 0


class CallWatch:
    """One call's deadline and cancellation state."""

    __slots__ = ("cancel_reason", "deadline", "grace_until")

    def __init__(self, deadline: float | None) -> None:
        if deadline is not None and math.isnan(deadline):
            raise ValueError("a deadline cannot be NaN")
        self.deadline = deadline
        self.cancel_reason: CancelReason | None = None
        self.grace_until: float | None = None

    def due(self, now: float) -> bool:
        """True once the deadline has passed (``now >= deadline``)."""
        return self.deadline is not None and now >= self.deadline

    def wake_at(self) -> float:
        """When the watchdog must act next: the deadline, then the end of the grace."""
        if self.grace_until is not None:
            return self.grace_until
        return math.inf if self.deadline is None else self.deadline

    def begin_cancel(self, reason: CancelReason, now: float, grace: float) -> float:
        """Record that a cancel is being sent; returns the end of its grace period."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
            self.grace_until = now + grace
        assert self.grace_until is not None
        return self.grace_until

    def judge(self, kind: Literal["result", "error", "acknowledged"], now: float) -> Verdict:
        """The disarm: what a terminal event that arrives at ``now`` means."""
        if kind == "acknowledged":
            if self.cancel_reason in ("deadline", "session_deadline") or self.due(now):
                return "timed_out"
            return "cancelled"
        deadline = self.deadline  # `due`, inline: every result and error comes here
        if deadline is not None and now >= deadline:
            return "late"
        return "accept"
