"""`Outcome`: what one supervised call ended as, and what each status guarantees.

Exactly one `Outcome` per call. The five statuses are the only ones a caller can see:

- ``completed``: the worker's result was authenticated and accepted before the deadline;
  ``value`` holds it.
- ``failed``: the adapter reported a failure (``error_code``/``error``), the result broke
  the tool's rules (``denied``), or the host could not run the call (``no_worker``).
- ``cancelled``: the adapter acknowledged a cancel: it stopped its effect.
- ``timed_out``: the deadline passed and the call stopped cleanly (it acknowledged the
  watchdog's cancel, or it was never dispatched).
- ``indeterminate``: the effect may or may not have happened (killed, crashed, a protocol
  violation, a result after the deadline). Never reported as completed or cancelled; the
  ledger keeps the operation pending until it is reconciled or expired.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Status = Literal["completed", "failed", "cancelled", "timed_out", "indeterminate"]
STATUSES: tuple[Status, ...] = ("completed", "failed", "cancelled", "timed_out", "indeterminate")


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """One call's end. Durations are seconds on the host's monotonic clock.

    ``kill_reason`` says why a session was killed under the call (``deadline``,
    ``session_deadline``, ``host_cancel``, ``protocol:<code>``, ``eof``, ``crash:<how>``,
    ``memory``, ``pids`` ...); ``termination`` is the sandbox's own classification of the
    worker's end when it has one.
    """

    status: Status
    tool: str
    value: Any = None
    error: str | None = None
    error_code: str | None = None
    retryable: bool = False
    kill_reason: str | None = None
    termination: str | None = None
    op_id: int | None = None
    session_id: str | None = None
    rid: str | None = None
    attempt: int = 0
    idempotency_key: str | None = None
    chunks: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    queued_s: float = 0.0
    run_s: float = 0.0
    total_s: float = 0.0
    peak_memory: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"
