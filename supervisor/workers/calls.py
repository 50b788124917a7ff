"""One supervised call: its ledger operation, its session listener, its `Outcome`.

`SupervisedCall` is what a session reports to (`CallListener`). The ledger transition of
a terminal event happens right there, synchronously, in the same scheduling step as the
watchdog's disarm: nothing can slip between "accepted before the deadline" and
"completed in the ledger". The `Outcome` is built afterwards by the task driving the
call, once the sandbox's own account of the end (termination, peak memory) is known.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from supervisor.ledger import (
    AlreadyCompleted,
    CancellationNotRequested,
    Cancelled,
    Completed,
    Denied,
    Failed,
    Ledger,
    LedgerError,
    LedgerOutcome,
    OperationIndeterminate,
    TimedOut,
)
from supervisor.workers.outcome import Outcome, Status
from supervisor.workers.watchdog import CallEnd, CancelReason

if TYPE_CHECKING:
    from supervisor.workers.session import Session, SessionCall

log = logging.getLogger(__name__)

ChunkCallback = Callable[[str], Any]


class SupervisedCall:
    """A call from `Supervisor.invoke`/`start` to its one `Outcome`."""

    __slots__ = (
        "attempt",
        "bytes_out",
        "chunk_callback",
        "chunks",
        "claimed",
        "created_at",
        "deadline",
        "dispatched_at",
        "done",
        "end",
        "ended_at",
        "error",
        "error_code",
        "idempotency_key",
        "kill_reason",
        "ledger",
        "ledger_head",
        "max_attempts",
        "on_indeterminate",
        "op_id",
        "outcome",
        "resolved",
        "retry_pending",
        "retryable",
        "session",
        "session_call",
        "status",
        "tool",
        "value",
        "value_out",
    )

    def __init__(
        self,
        ledger: Ledger,
        op_id: int,
        tool: str,
        value: Any,
        *,
        deadline: float | None,
        max_attempts: int,
        idempotency_key: str | None,
        on_chunk: ChunkCallback | None,
        on_indeterminate: Callable[[SupervisedCall], None],
        created_at: float,
    ) -> None:
        self.ledger = ledger
        self.op_id = op_id
        self.tool = tool
        self.value = value
        self.deadline = deadline
        self.max_attempts = max_attempts
        #: The caller's key, else the ledger's (known once claimed).
        self.idempotency_key = idempotency_key
        self.chunk_callback = on_chunk
        self.on_indeterminate = on_indeterminate
        self.created_at = created_at
        self.dispatched_at: float | None = None
        self.ended_at: float | None = None
        self.attempt = 0
        self.claimed = False
        self.session: Session | None = None
        self.session_call: SessionCall | None = None
        self.chunks = 0
        self.bytes_out = 0
        self.retry_pending = False
        self.end: CallEnd | None = None
        # what the ledger made of the end (set once, by `resolve`)
        self.resolved = False
        self.status: Status | None = None
        self.value_out: Any = None
        self.error: str | None = None
        self.error_code: str | None = None
        self.retryable = False
        self.kill_reason: str | None = None
        self.ledger_head: tuple[int, str] | None = None
        self.outcome: Outcome | None = None
        #: Set once the outcome is built; made only for a `CallHandle` (an awaited
        #: ``invoke`` needs none).
        self.done: anyio.Event | None = None

    # -- CallListener: called synchronously by the session ----------------------------------

    def on_chunk(self, index: int, text: str) -> None:
        try:
            chunk = self.ledger.push_chunk(self.op_id, text)
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

    def on_cancelling(self, reason: CancelReason) -> None:
        try:
            self.ledger.request_cancellation(self.op_id)
        except LedgerError as exc:
            log.debug("op %s: cancellation not requested in the ledger: %s", self.op_id, exc)

    def on_end(self, end: CallEnd) -> None:
        """The disarm's verdict, applied to the ledger in the same step."""
        self.end = end
        self.ended_at = end.at
        self.bytes_out += end.output_bytes
        ledger, op_id = self.ledger, self.op_id
        kind = end.kind
        if kind == "indeterminate":
            self._mark_indeterminate(end.reason or "unknown")
            return
        try:
            if kind == "result":
                self.resolve(ledger.complete(op_id, end.value))
            elif kind == "error":
                self.error_code = end.code
                self.retryable = end.retryable
                if end.retryable and self.attempt < self.max_attempts and not self._late(end.at):
                    self.retry_pending = True
                    self.error = end.message
                    return
                self.resolve(ledger.fail(op_id, end.message or end.code or "failed"))
            else:  # cancelled / timed_out: the adapter acknowledged
                try:
                    self.resolve(ledger.confirm_cancellation(op_id))
                except CancellationNotRequested:
                    self.resolve(ledger.cancel(op_id))
        except (AlreadyCompleted, OperationIndeterminate):
            self.resolve_from_ledger()
        except LedgerError as exc:  # a ledger refusal we did not foresee: never guess
            log.error("op %s: the ledger refused the end %s: %s", op_id, kind, exc)
            self._mark_indeterminate(f"ledger:{type(exc).__name__}")

    # -- resolution --------------------------------------------------------------------------

    def resolve(self, outcome: LedgerOutcome | None, *, error_code: str | None = None) -> None:
        """Record the ledger's terminal outcome (once)."""
        if self.resolved:
            return
        self.resolved = True
        self.ledger_head = self.ledger.audit_head()
        if outcome is None:
            self.status = "indeterminate"
            return
        self.status = outcome.status  # type: ignore[assignment]  # the same five names
        if type(outcome) is Completed:
            self.value_out = outcome.value
        elif isinstance(outcome, Failed):
            self.error = outcome.message
        elif isinstance(outcome, Denied):
            self.error = outcome.reason
            self.error_code = "denied"
        elif isinstance(outcome, TimedOut):
            self.error_code = self.error_code or "deadline"
            self.error = f"the deadline passed ({outcome.reason})"
        elif isinstance(outcome, Cancelled):
            self.error = f"cancelled ({outcome.reason})"
        if error_code is not None:
            self.error_code = error_code

    def resolve_from_ledger(self) -> None:
        """Take the ledger's own terminal outcome (it resolved the operation already,
        e.g. in an expiry sweep); indeterminate if it has none to give."""
        try:
            outcome = self.ledger.outcome(self.op_id)
        except LedgerError:
            outcome = None
        if outcome is None:
            self._mark_indeterminate("ledger")
        else:
            self.resolve(outcome)

    def _mark_indeterminate(self, reason: str) -> None:
        self.kill_reason = reason
        self.error = f"the outcome is unknown: {reason}"
        self.error_code = "indeterminate"
        try:
            self.ledger.mark_indeterminate(self.op_id, reason)
        except AlreadyCompleted:
            pass  # expired meanwhile; the call is still indeterminate to its caller
        except LedgerError as exc:
            log.debug("op %s: not marked indeterminate: %s", self.op_id, exc)
        self.resolve(None)
        self.on_indeterminate(self)

    def _ledger_key(self) -> str | None:
        try:
            return self.ledger.status(self.op_id).idempotency_key
        except LedgerError:
            return None

    def _late(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    # -- the Outcome ---------------------------------------------------------------------------

    def build_outcome(self, now: float) -> Outcome:
        """The caller's `Outcome` (once), with the sandbox's account of the session."""
        if self.outcome is not None:
            return self.outcome
        status = self.status
        assert status is not None
        session = self.session
        session_call = self.session_call
        ended = self.ended_at if self.ended_at is not None else now
        started = self.dispatched_at
        created = self.created_at
        session_id = rid = termination = peak = error = error_code = None
        bytes_in = 0
        retryable = False
        if session is not None:
            peak = session.peak_memory_now(now)
            if session_call is not None:
                session_id, rid, bytes_in = session.id, session_call.rid, session_call.input_bytes
                if status == "indeterminate":
                    termination = session.termination
        if status != "completed":
            error, error_code = self.error, self.error_code
            retryable = status == "failed" and self.retryable
        outcome = self.outcome = Outcome(
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
            idempotency_key=self.idempotency_key or self._ledger_key(),
            chunks=self.chunks,
            bytes_in=bytes_in,
            bytes_out=self.bytes_out,
            queued_s=(ended if started is None else started) - created,
            run_s=0.0 if started is None else max(0.0, ended - started),
            total_s=ended - created,
            peak_memory=peak,
        )
        if self.done is not None:
            self.done.set()
        return outcome


class CallHandle:
    """A call started with `Supervisor.start`: cancel it, or wait for its `Outcome`."""

    __slots__ = ("_call", "_failure", "_scope")

    def __init__(self, call: SupervisedCall) -> None:
        self._call = call
        self._scope = anyio.CancelScope()
        self._failure: BaseException | None = None
        if call.done is None:
            call.done = anyio.Event()
            if call.outcome is not None:
                call.done.set()

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
        done = self._call.done
        return done is not None and done.is_set()

    async def outcome(self) -> Outcome:
        """Wait for the call's `Outcome`."""
        done = self._call.done
        assert done is not None  # made with the handle
        await done.wait()
        if self._failure is not None:
            raise RuntimeError("the call failed inside the supervisor") from self._failure
        assert self._call.outcome is not None
        return self._call.outcome

    def request_cancel(self) -> None:
        """Ask for a cooperative cancel and return at once (in the supervisor's loop);
        `outcome` tells how the call ended."""
        self._scope.cancel()

    async def cancel(self) -> Outcome:
        """Cancel cooperatively (``cancel``, grace, then kill) and return the `Outcome`:
        ``cancelled`` if the adapter acknowledged; it may also have completed first."""
        self.request_cancel()
        return await self.outcome()
