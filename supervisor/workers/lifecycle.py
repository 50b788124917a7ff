"""One call's lifecycle, sans-IO: its states, what can happen to it, and the one table of
transitions (h11's ``_state.py`` is the model).

`supervisor.workers.calls.Call` owns a call and does what each happening asks of the
ledger, the session and the pool; this module only says which happenings are legal in
which state and where each leads, and `CallWatch` (the watchdog's rules) judges every
terminal event against the deadline. A happening the table does not allow is a bug in
the owner: `CallStateError`, never a silent change.

::

    QUEUED ──slot──> DISPATCHED ──result/error/late/killed──> RESOLVED
      │  ^               │  └──deadline/cancel──> CANCELLING ──(any end)──> RESOLVED
      │  └─retry── RETRY_WAIT <──retryable──┘
      └──expired/no_worker/refused/cancel/ledger_ended──> RESOLVED

- ``queued``: the ledger started the operation; it waits for a session slot (first
  come, first served), up to the wait's limit and its deadline.
- ``dispatched``: claimed, its ``invoke`` queued on a session; the watchdog is armed.
- ``cancelling``: a ``cancel`` was sent (the caller's, or the watchdog's at the
  deadline); the grace runs, then the sandbox is killed.
- ``retry_wait``: a retryable adapter error; the back-off before the next attempt (same
  idempotency key), which queues again.
- ``resolved``: the ledger holds the call's end, or the call is indeterminate.
"""

from __future__ import annotations

from typing import Final, Literal

from supervisor.workers.watchdog import CallWatch

CallState = Literal["queued", "dispatched", "cancelling", "retry_wait", "resolved"]
QUEUED: Final = "queued"
DISPATCHED: Final = "dispatched"
CANCELLING: Final = "cancelling"
RETRY_WAIT: Final = "retry_wait"
RESOLVED: Final = "resolved"

Happening = Literal[
    "slot",
    "slot_lost",
    "refused",
    "expired",
    "no_worker",
    "ledger_ended",
    "result",
    "error",
    "retryable",
    "acknowledged",
    "late",
    "killed",
    "deadline",
    "cancel",
    "retry",
    "retry_refused",
]
#: A session slot was given and the call's ``invoke`` is queued on it.
SLOT: Final = "slot"
#: The session could not take the call (it used its budget, or died): wait in line again.
SLOT_LOST: Final = "slot_lost"
#: The host refused the call (it breaks the tool's grant): nothing was sent.
REFUSED: Final = "refused"
#: The deadline passed before the call was dispatched.
EXPIRED: Final = "expired"
#: No worker became free in time, or none can start.
NO_WORKER: Final = "no_worker"
#: The ledger ended the operation meanwhile (an expiry sweep): its word stands.
LEDGER_ENDED: Final = "ledger_ended"
#: A result or error accepted in time (the watchdog's disarm said so).
RESULT: Final = "result"
ERROR: Final = "error"
#: A retryable error with attempts and time left (never after a cancel).
RETRYABLE: Final = "retryable"
#: The adapter acknowledged the cancel: it stopped its effect.
ACKNOWLEDGED: Final = "acknowledged"
#: A result or error at or after the deadline: discarded, the session killed.
LATE: Final = "late"
#: The session died under the call (killed, crashed, a protocol violation).
KILLED: Final = "killed"
#: The deadline passed with the call in flight: the watchdog's cancel.
DEADLINE: Final = "deadline"
#: The caller (or the supervisor's close) asked to stop.
CANCEL: Final = "cancel"
#: The back-off is over and the ledger granted the next attempt.
RETRY: Final = "retry"
#: The back-off is over but the ledger refused the next attempt: the last error stands.
RETRY_REFUSED: Final = "retry_refused"

#: The ends of a call in flight (its chunks change nothing: a chunk is no transition).
_ENDS: Final[dict[Happening, CallState]] = {
    RESULT: RESOLVED,
    ERROR: RESOLVED,
    LATE: RESOLVED,
    KILLED: RESOLVED,
}

#: state -> happening -> next state. Nothing else is legal.
TRANSITIONS: Final[dict[CallState, dict[Happening, CallState]]] = {
    QUEUED: {
        SLOT: DISPATCHED,
        SLOT_LOST: QUEUED,
        REFUSED: RESOLVED,
        EXPIRED: RESOLVED,
        NO_WORKER: RESOLVED,
        LEDGER_ENDED: RESOLVED,
        CANCEL: RESOLVED,
    },
    DISPATCHED: {
        **_ENDS,
        RETRYABLE: RETRY_WAIT,
        DEADLINE: CANCELLING,
        CANCEL: CANCELLING,
    },
    CANCELLING: {
        **_ENDS,
        ACKNOWLEDGED: RESOLVED,
        DEADLINE: CANCELLING,
        CANCEL: CANCELLING,
    },
    RETRY_WAIT: {
        RETRY: QUEUED,
        RETRY_REFUSED: RESOLVED,
        LEDGER_ENDED: RESOLVED,
        CANCEL: RESOLVED,
    },
    RESOLVED: {
        CANCEL: RESOLVED,  # too late to ask: nothing happens
    },
}


class CallStateError(RuntimeError):
    """A happening the table does not allow in the call's state (a bug in its owner)."""


class CallLifecycle(CallWatch):
    """The state of one call and its watchdog (deadline, cancel reason, grace)."""

    __slots__ = ("state",)

    def __init__(self, deadline: float | None) -> None:
        super().__init__(deadline)
        self.state: CallState = QUEUED

    def happen(self, happening: Happening) -> CallState:
        """Move along the table; `CallStateError` if ``happening`` is not legal now."""
        try:
            state = self.state = TRANSITIONS[self.state][happening]
        except KeyError:
            raise CallStateError(f"{happening} cannot happen to a {self.state} call") from None
        return state

    @property
    def in_flight(self) -> bool:
        """Dispatched (or cancelling): a session holds the call."""
        return self.state == DISPATCHED or self.state == CANCELLING

    @property
    def resolved(self) -> bool:
        return self.state == RESOLVED
