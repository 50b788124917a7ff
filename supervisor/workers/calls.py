"""One call, one owner: `Call` moves a call through its lifecycle, from admission to its
`Outcome`, and nothing else does.

Whatever happens to a call reaches its `Call` synchronously, from whoever saw it: a free
slot from the pool (in the task that freed it: the next call in line is dispatched in
the same step, with no task woken for it), a frame from the session's reader (the
watchdog's disarm and the ledger transition in the same step: nothing can slip between
"accepted before the deadline" and "completed in the ledger"), a timer from the
supervisor's clock (the wait's limit, the deadline, the grace, the back-off), a cancel
from its caller. Each is a happening of `supervisor.workers.lifecycle`'s table; the
`Call` does what it asks of the ledger, the session and the pool. The task that awaits
the call wakes once, when it is resolved, and builds the `Outcome` (after the sandbox's
reap when its end killed the session: the sandbox's own account of the end is known
then).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from supervisor._loop import Signal
from supervisor.ledger import (
    AlreadyCompleted,
    CancellationNotRequested,
    Cancelled,
    Completed,
    DeadlineElapsed,
    Denied,
    Failed,
    Ledger,
    LedgerError,
    LedgerOutcome,
    OperationIndeterminate,
    RetryClass,
    TimedOut,
)
from supervisor.workers.lifecycle import (
    ACKNOWLEDGED,
    CANCEL,
    CANCELLING,
    DEADLINE,
    DISPATCHED,
    ERROR,
    EXPIRED,
    KILLED,
    LATE,
    LEDGER_ENDED,
    NO_WORKER,
    QUEUED,
    REFUSED,
    RESOLVED,
    RESULT,
    RETRY,
    RETRY_REFUSED,
    RETRY_WAIT,
    RETRYABLE,
    SLOT,
    SLOT_LOST,
    CallLifecycle,
    Happening,
)
from supervisor.workers.outcome import Outcome, Status
from supervisor.workers.watchdog import CancelReason
from worker_runtime.protocol.errors import Refused

if TYPE_CHECKING:
    from supervisor.workers.session import Session

log = logging.getLogger(__name__)

ChunkCallback = Callable[[str], Any]

#: Refusals that mean "this session is used up", not "this call is wrong".
SESSION_EXHAUSTED = frozenset(
    {"call_budget_exhausted", "id_capacity_exhausted", "too_many_in_flight", "sequence_exhausted"}
)


class CallPool(Protocol):
    """The pool as a call sees it (`supervisor.workers.pool.Pool`)."""

    def give_now(self, taker: Call, now: float) -> bool: ...

    def wait_in_line(self, taker: Call) -> None: ...

    def withdraw(self, taker: Call) -> None: ...

    def release(self, session: Session, now: float | None = None) -> None: ...

    def retire(self, session: Session) -> None: ...

    def unavailable(self) -> str: ...


class Audited(Protocol):
    """Whoever hears call events (`supervisor.workers.call_audit.AuditHub`)."""

    #: Whether anyone does now (then each end notes the ledger's head).
    active: bool


class CallHost:
    """What every call of one supervisor shares: the ledger, the clock and its timers,
    the wait's bound and the retry back-off, and the hooks the supervisor listens on."""

    __slots__ = (
        "acquire_timeout",
        "arm",
        "audit",
        "disarm",
        "event",
        "ledger",
        "note_indeterminate",
        "now",
        "outdated",
        "retry_backoff",
    )

    def __init__(
        self,
        ledger: Ledger,
        *,
        now: Callable[[], float],
        event: Callable[[], Signal],
        arm: Callable[[Call, float], None],
        disarm: Callable[[Call], None],
        note_indeterminate: Callable[[Call], None],
        audit: Audited,
        acquire_timeout: float,
        retry_backoff: float,
        outdated: Callable[[str, Session], bool] = lambda tool, session: False,
    ) -> None:
        self.ledger = ledger
        self.now = now
        self.event = event
        #: ``arm(call, when)``: look at the call at ``when`` (`Call.on_timer`).
        self.arm = arm
        self.disarm = disarm
        self.note_indeterminate = note_indeterminate
        self.audit = audit
        self.acquire_timeout = acquire_timeout
        self.retry_backoff = retry_backoff
        #: ``outdated(tool, session)``: the session was granted an earlier listing of the
        #: tool's group (its MCP server's tools changed since).
        self.outdated = outdated


class Call(CallLifecycle):
    """A call from `Supervisor.invoke`/`start` to its one `Outcome`."""

    __slots__ = (
        "attempt",
        "bytes_out",
        "chunk_callback",
        "chunks",
        "claimed",
        "created_at",
        "dispatched_at",
        "done",
        "ended_at",
        "error",
        "error_code",
        "holding",
        "host",
        "idempotency_key",
        "input_bytes",
        "kill_reason",
        "killed_session",
        "ledger_head",
        "max_attempts",
        "op_id",
        "outcome",
        "pool",
        "queued_until",
        "retry_at",
        "retryable",
        "rid",
        "session",
        "status",
        "timer_at",
        "tool",
        "value",
        "value_out",
    )

    def __init__(
        self,
        host: CallHost,
        pool: CallPool,
        op_id: int,
        tool: str,
        value: Any,
        *,
        deadline: float | None,
        max_attempts: int,
        idempotency_key: str | None,
        on_chunk: ChunkCallback | None,
        created_at: float,
    ) -> None:
        super().__init__(deadline)
        self.host = host
        self.pool = pool
        self.op_id = op_id
        self.tool = tool
        self.value = value
        self.max_attempts = max_attempts
        #: The caller's key, else the ledger's (known once claimed).
        self.idempotency_key = idempotency_key
        self.chunk_callback = on_chunk
        self.created_at = created_at
        self.dispatched_at: float | None = None
        self.ended_at: float | None = None
        self.queued_until = 0.0
        self.retry_at = 0.0
        self.timer_at: float | None = None
        self.attempt = 0
        self.claimed = False
        self.session: Session | None = None
        self.rid: str | None = None
        self.input_bytes = 0
        self.chunks = 0
        self.bytes_out = 0
        self.killed_session = False
        self.holding = False  # a session slot, from the invoke to the end
        # what the ledger made of the end (set once, by `_resolve`)
        self.status: Status | None = None
        self.value_out: Any = None
        self.error: str | None = None
        self.error_code: str | None = None
        self.retryable = False
        self.kill_reason: str | None = None
        self.ledger_head: tuple[int, str] | None = None
        self.outcome: Outcome | None = None
        #: Set once the call is resolved: its waiter builds the outcome then.
        self.done: Signal = host.event()

    # -- in line for a slot -----------------------------------------------------------------

    def queue(self, now: float) -> None:
        """Take a free slot at once, or wait in line (bounded by the wait's limit and the
        deadline). ``now``: the loop's clock."""
        host = self.host
        if self.pool.give_now(self, now) or self.state != QUEUED:
            return
        until = now + host.acquire_timeout
        deadline = self.deadline
        if deadline is not None and deadline < until:
            until = deadline
        self.queued_until = until
        self.pool.wait_in_line(self)
        host.arm(self, until)

    @property
    def waiting(self) -> bool:
        """In line for a slot (the pool skips a call that is not any more)."""
        return self.state == QUEUED

    def take_slot(self, session: Session, now: float) -> bool:
        """The pool hands over a slot at ``now``: claim (the first attempt) and queue the
        ``invoke`` on ``session``. False if the call did not use it (it is resolved, or
        the session is used up and the call stays in line)."""
        ledger = self.host.ledger
        if not self.claimed:
            try:
                invocation = ledger.claim(self.op_id)
            except DeadlineElapsed:
                self._resolve_undispatched(EXPIRED)
                return False
            except LedgerError:  # resolved meanwhile (an expiry sweep): take its word
                self._resolve_from_ledger(LEDGER_ENDED)
                return False
            self.claimed = True
            self.attempt = invocation.attempt
            self.idempotency_key = invocation.idempotency_key
        assert self.idempotency_key is not None
        deadline = self.deadline
        try:
            self.rid, self.input_bytes = session.begin(
                self, self.tool, self.value, self.idempotency_key, self.attempt, deadline
            )
        except Refused as exc:
            if exc.code in SESSION_EXHAUSTED or (
                exc.code == "unknown_tool" and self.host.outdated(self.tool, session)
            ):  # used up, or granted before the tools changed: the next session
                self.pool.retire(session)
                self._lose_slot()
            else:  # the call itself breaks the grant: the worker never saw it
                self._resolve(
                    REFUSED,
                    ledger.fail(self.op_id, f"refused by the host: {exc}"),
                    error_code=exc.code,
                )
            return False
        except Exception as exc:  # SessionUnusable: it died meanwhile; the next one
            log.debug("op %s: session %s unusable: %s", self.op_id, session.id, exc)
            self._lose_slot()
            return False
        # The watchdog's deadline is the call's own from the start (`judge` reads it);
        # its timer is armed in the same step as the invoke is queued.
        host = self.host
        if deadline is not None:
            host.arm(self, deadline)
        elif self.timer_at is not None:  # the wait in line is over
            host.disarm(self)
        self.session = session
        self.holding = True
        self.dispatched_at = now
        self.happen(SLOT)
        return True

    def fail_slot(self, why: str) -> None:
        """No worker will come (none can start, or the pool closes)."""
        if self.state == QUEUED:
            self._resolve_undispatched(NO_WORKER, why)

    def _lose_slot(self) -> None:
        self.happen(SLOT_LOST)

    # -- the session reports (synchronously, from its reader) --------------------------------

    def on_chunk(self, index: int, text: str) -> None:
        try:
            chunk = self.host.ledger.push_chunk(self.op_id, text)
        except LedgerError as exc:
            log.debug("op %s: chunk %s not released: %s", self.op_id, index, exc)
            return
        self.chunks += 1
        self.bytes_out += chunk.source_bytes
        callback = self.chunk_callback
        if callback is not None:
            try:
                callback(chunk.text)
            except Exception:
                log.exception("op %s: on_chunk failed; no more chunks for this call", self.op_id)
                self.chunk_callback = None

    def on_result(self, value: Any, size: int, now: float) -> None:
        """A result, authenticated and in order: the watchdog's disarm, then the ledger."""
        if self.judge("result", now) == "late":
            self._late(now)
            return
        self.ended_at = now
        self.bytes_out += size
        try:
            outcome = self.host.ledger.complete(self.op_id, value)
        except LedgerError as exc:
            self._ledger_refused_end(exc, RESULT)
        else:
            self._resolve(RESULT, outcome)
        self._release(now)

    def on_error(self, code: str, message: str, retryable: bool, size: int, now: float) -> None:
        if self.judge("error", now) == "late":
            self._late(now)
            return
        self.ended_at = now
        self.bytes_out += size
        self.error_code = code
        self.retryable = retryable
        if retryable and self.attempt < self.max_attempts and self.state == DISPATCHED:
            self.error = message
            self.happen(RETRYABLE)
            self._release(now)
            wait = self.host.retry_backoff * 2 ** max(0, self.attempt - 1)
            at = now + wait
            if self.deadline is not None and self.deadline < at:
                at = self.deadline
            self.retry_at = at
            self.host.arm(self, at)
            return
        try:
            outcome = self.host.ledger.fail(self.op_id, message or code or "failed")
        except LedgerError as exc:
            self._ledger_refused_end(exc, ERROR)
        else:
            self._resolve(ERROR, outcome)
        self._release(now)

    def on_acknowledged(self, now: float) -> None:
        """The adapter stopped (``cancelled``, or ``timed_out`` past the deadline: the
        ledger judges that by the same clock)."""
        self.ended_at = now
        ledger = self.host.ledger
        try:
            try:
                outcome = ledger.confirm_cancellation(self.op_id)
            except CancellationNotRequested:
                outcome = ledger.cancel(self.op_id)
        except LedgerError as exc:
            self._ledger_refused_end(exc, ACKNOWLEDGED)
        else:
            self._resolve(ACKNOWLEDGED, outcome)
        self._release(now)

    def on_killed(self, reason: str, now: float) -> None:
        """The session died under the call: indeterminate, with its kill reason."""
        self.ended_at = now
        self.killed_session = True
        self._mark_indeterminate(KILLED, reason)
        self._release(now)

    def _late(self, now: float) -> None:
        """A result or error at or after the deadline: never exposed; the session that
        sent it is killed (every other call on it is indeterminate too)."""
        self.ended_at = now
        self.killed_session = True
        self._mark_indeterminate(LATE, "deadline")
        session = self.session
        assert session is not None
        session.kill("deadline")
        self._release(now)

    def _ledger_refused_end(self, exc: LedgerError, happening: Happening) -> None:
        if isinstance(exc, AlreadyCompleted | OperationIndeterminate):
            self._resolve_from_ledger(happening)  # expired meanwhile: its word stands
        else:  # a ledger refusal we did not foresee: never guess
            log.error("op %s: the ledger refused the end %s: %s", self.op_id, happening, exc)
            self._mark_indeterminate(happening, f"ledger:{type(exc).__name__}")

    def _release(self, now: float) -> None:
        """The slot goes back to the pool (the next call in line may take it now)."""
        if self.holding:
            self.holding = False
            session = self.session
            assert session is not None
            self.pool.release(session, now)

    # -- cancellation and time ---------------------------------------------------------------

    def cancel(self, reason: CancelReason = "host_cancel") -> None:
        """Stop the call: one never dispatched (or between attempts) is cancelled at
        once; one in flight gets a cooperative ``cancel`` and the grace, then the kill.
        Synchronous: the call's waiter learns the end."""
        state = self.state
        if state == QUEUED:
            self.pool.withdraw(self)
            self._resolve_undispatched(CANCEL)
        elif state == RETRY_WAIT:
            self._resolve_undispatched(CANCEL)
        elif state == DISPATCHED:
            self._begin_cancel(CANCEL, reason)

    def _begin_cancel(self, happening: Happening, reason: CancelReason) -> None:
        session = self.session
        assert session is not None and self.rid is not None
        config = session.config  # the caller's cancel has longer: no deadline presses
        grace = config.host_cancel_grace if reason == "host_cancel" else config.cancel_grace
        grace_until = self.begin_cancel(reason, self.host.now(), grace)
        self.happen(happening)
        if session.can_send:
            try:
                self.host.ledger.request_cancellation(self.op_id)
            except LedgerError as exc:
                log.debug("op %s: cancellation not requested in the ledger: %s", self.op_id, exc)
            session.send_cancel(self.rid)
        self.host.arm(self, grace_until)

    def on_timer(self, now: float) -> None:
        """Whatever of the call's time has come: the wait's limit (queued), the deadline
        (in flight: the watchdog's cancel), the grace (the kill), the back-off (retry)."""
        state = self.state
        if state == DISPATCHED:
            if self.deadline is not None and now >= self.deadline:
                self._begin_cancel(DEADLINE, "deadline")
        elif state == CANCELLING:
            if self.grace_until is not None and now >= self.grace_until:
                session = self.session
                assert session is not None and self.cancel_reason is not None
                session.kill(self.cancel_reason)  # the call ends through on_killed
            elif self.grace_until is not None:
                self.host.arm(self, self.grace_until)
        elif state == QUEUED:
            if now >= self.queued_until:
                self.pool.withdraw(self)
                if self.deadline is not None and now >= self.deadline:
                    self._resolve_undispatched(EXPIRED)
                else:
                    self._resolve_undispatched(NO_WORKER, self.pool.unavailable())
            else:
                self.host.arm(self, self.queued_until)
        elif state == RETRY_WAIT:
            if now >= self.retry_at:
                self._retry()
            else:
                self.host.arm(self, self.retry_at)

    def _retry(self) -> None:
        """The next attempt with the same idempotency key, if the ledger grants it."""
        ledger = self.host.ledger
        retry_class = (
            RetryClass.RATE_LIMITED if self.error_code == "rate_limited" else RetryClass.TRANSIENT
        )
        try:
            invocation = ledger.retry(self.op_id, retry_class)
        except LedgerError:  # out of time, or resolved meanwhile: the last error stands
            try:
                self._resolve(RETRY_REFUSED, ledger.fail(self.op_id, self.error or "failed"))
            except LedgerError:
                self._resolve_from_ledger(LEDGER_ENDED)
            return
        self.attempt = invocation.attempt
        self.rid = None
        self.happen(RETRY)
        self.queue(self.host.now())

    # -- resolution ----------------------------------------------------------------------------

    def _resolve_undispatched(self, happening: Happening, message: str = "") -> None:
        """End a call that is not in flight: cancelled, out of time, or no worker."""
        ledger = self.host.ledger
        try:
            if happening == NO_WORKER:
                if not self.claimed:
                    ledger.claim(self.op_id)
                    self.claimed = True
                self._resolve(happening, ledger.fail(self.op_id, message), error_code="no_worker")
            else:  # never dispatched (this attempt): a direct cancel is always safe
                self._resolve(happening, ledger.cancel(self.op_id))
        except LedgerError:  # resolved meanwhile (an expiry sweep), or out of time
            try:
                self._resolve(happening, ledger.cancel(self.op_id))
            except LedgerError:
                self._resolve_from_ledger(LEDGER_ENDED)

    def _resolve_from_ledger(self, happening: Happening) -> None:
        """Take the ledger's own terminal outcome (it resolved the operation already, e.g.
        in an expiry sweep); indeterminate if it has none to give."""
        try:
            outcome = self.host.ledger.outcome(self.op_id)
        except LedgerError:
            outcome = None
        if outcome is None:
            self._mark_indeterminate(happening, "ledger")
        else:
            self._resolve(happening, outcome)

    def _mark_indeterminate(self, happening: Happening, reason: str) -> None:
        self.kill_reason = reason
        self.error = f"the outcome is unknown: {reason}"
        self.error_code = "indeterminate"
        try:
            self.host.ledger.mark_indeterminate(self.op_id, reason)
        except AlreadyCompleted:
            pass  # expired meanwhile; the call is still indeterminate to its caller
        except LedgerError as exc:
            log.debug("op %s: not marked indeterminate: %s", self.op_id, exc)
        self._resolve(happening, None)
        self.host.note_indeterminate(self)

    def _resolve(
        self,
        happening: Happening,
        outcome: LedgerOutcome | None,
        *,
        error_code: str | None = None,
    ) -> None:
        """Record the ledger's terminal outcome (None: indeterminate), once."""
        if self.happen(happening) != RESOLVED:
            raise AssertionError(f"{happening} does not resolve a call")
        host = self.host
        if self.timer_at is not None:
            host.disarm(self)
        if host.audit.active:
            self.ledger_head = host.ledger.audit_head()
        if outcome is None:
            self.status = "indeterminate"
        else:
            self.status = outcome.status  # type: ignore[assignment]  # the same five names
            kind = type(outcome)
            if kind is Completed:
                self.value_out = outcome.value  # type: ignore[union-attr]
            elif kind is Failed:
                self.error = outcome.message  # type: ignore[union-attr]
            elif kind is Denied:
                self.error = outcome.reason  # type: ignore[union-attr]
                self.error_code = "denied"
            elif kind is TimedOut:
                self.error_code = self.error_code or "deadline"
                self.error = f"the deadline passed ({outcome.reason})"  # type: ignore[union-attr]
            elif kind is Cancelled:
                self.error = f"cancelled ({outcome.reason})"  # type: ignore[union-attr]
        if error_code is not None:
            self.error_code = error_code
        self.value = None  # the input is not needed any more
        self.done.set()

    # -- the Outcome ---------------------------------------------------------------------------

    async def wait_reaped(self) -> None:
        """When the call's end killed its session: until nothing of that sandbox lives."""
        session = self.session
        if self.killed_session and session is not None and session.dead:
            await session.wait_reaped()

    def build_outcome(self, now: float) -> Outcome:
        """The caller's `Outcome` (once), with the sandbox's account of the session."""
        if self.outcome is not None:
            return self.outcome
        status = self.status
        assert status is not None
        session = self.session
        ended = self.ended_at if self.ended_at is not None else now
        started = self.dispatched_at
        created = self.created_at
        session_id = rid = termination = peak = error = error_code = None
        bytes_in = 0
        retryable = False
        if session is not None:
            peak = session.peak_memory_now(now)
            if self.rid is not None:
                session_id, rid, bytes_in = session.id, self.rid, self.input_bytes
                if status == "indeterminate":
                    termination = session.termination
        if status != "completed":
            error, error_code = self.error, self.error_code
            retryable = status == "failed" and self.retryable
        key = self.idempotency_key
        if key is None:
            key = self._ledger_key()
        self.outcome = Outcome(
            status=status,
            tool=self.tool,
            value=self.value_out,
            error=error,
            error_code=error_code,
            retryable=retryable,
            kill_reason=self.kill_reason,
            termination=termination,
            op_id=self.op_id,
            session_id=session_id,
            rid=rid,
            attempt=self.attempt,
            idempotency_key=key,
            chunks=self.chunks,
            bytes_in=bytes_in,
            bytes_out=self.bytes_out,
            queued_s=(ended if started is None else started) - created,
            run_s=0.0 if started is None or ended < started else ended - started,
            total_s=ended - created,
            peak_memory=peak,
        )
        return self.outcome

    def _ledger_key(self) -> str | None:
        try:
            return self.host.ledger.status(self.op_id).idempotency_key
        except LedgerError:
            return None


class CallHandle:
    """A call started with `Supervisor.start`: cancel it, or wait for its `Outcome`.

    Everything here is for the supervisor's own event loop (the hosting wrappers carry
    a handle's methods there from other loops and threads)."""

    __slots__ = ("_call", "_ended", "_failure")

    def __init__(self, call: Call, ended: Signal) -> None:
        self._call = call
        #: Set once the outcome is built (or the call failed inside the supervisor).
        self._ended = ended
        self._failure: BaseException | None = None

    @property
    def op_id(self) -> int:
        return self._call.op_id

    @property
    def tool(self) -> str:
        return self._call.tool

    @property
    def idempotency_key(self) -> str | None:
        """The caller's key, or the ledger's once the call was claimed."""
        return self._call.idempotency_key

    @property
    def done(self) -> bool:
        """True once the outcome is known."""
        return self._ended.is_set()

    @property
    def call(self) -> Call:
        """The call itself (its lifecycle state: ``handle.call.state``)."""
        return self._call

    async def outcome(self) -> Outcome:
        """Wait for the call's `Outcome`."""
        await self._ended.wait()
        if self._failure is not None:
            raise RuntimeError("the call failed inside the supervisor") from self._failure
        assert self._call.outcome is not None
        return self._call.outcome

    def request_cancel(self) -> None:
        """Ask for a cooperative cancel and return at once; `outcome` tells how the call
        ended."""
        self._call.cancel()

    async def cancel(self) -> Outcome:
        """Cancel cooperatively (``cancel``, grace, then kill) and return the `Outcome`:
        ``cancelled`` if the adapter acknowledged; it may also have completed first."""
        self.request_cancel()
        return await self.outcome()

    def settle(self, failure: BaseException | None = None) -> None:
        """The supervisor's: the outcome is built (or ``failure`` says why it never will
        be); wake whoever waits."""
        self._failure = failure
        self._ended.set()
