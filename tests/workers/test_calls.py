"""One call, one owner (sans-IO): `Call` driven through its lifecycle by hand, against a
real `Ledger` on a hand-turned clock, a pool that hands slots in line and a session that
only records what the call asks of it. Each test is one path of the lifecycle's table,
checked in the ledger (the operation's end), the pool (the slot comes back once) and the
`Outcome` the caller would get."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from supervisor.ledger import Ledger, StreamPolicy, ToolPolicy
from supervisor.workers.calls import Call, CallHandle, CallHost
from supervisor.workers.lifecycle import (
    CANCELLING,
    DISPATCHED,
    QUEUED,
    RESOLVED,
    RETRY_WAIT,
    CallStateError,
)
from supervisor.workers.timers import Timers
from worker_runtime.protocol.errors import Refused

NEEDS_SANDBOX = False

GRACE = 0.02  # after a deadline
HOST_GRACE = 0.25  # after the caller's cancel
WAIT = 5.0  # the host's acquire timeout
BACKOFF = 0.05


class Flag:
    """A `Signal` without a loop: these tests never await."""

    def __init__(self) -> None:
        self.flag = False

    def set(self) -> None:
        self.flag = True

    def is_set(self) -> bool:
        return self.flag

    async def wait(self) -> None:
        raise AssertionError("nothing awaits in a sans-IO test")


class SessionConfigStub:
    cancel_grace = GRACE
    host_cancel_grace = HOST_GRACE


class FakeSession:
    """Records the invokes and cancels a call queues; `kill` ends its calls as the real
    session does (synchronously, ``on_killed``)."""

    def __init__(self, name: str, clock: Clock) -> None:
        self.id = name
        self.clock = clock
        self.config = SessionConfigStub()
        self.state = "ready"
        self.calls: dict[str, Call] = {}
        self.invokes: list[tuple[str, Any, str, int, float | None]] = []
        self.cancels: list[str] = []
        self.killed: str | None = None
        self.termination: str | None = None
        self.refuse: str | None = None  # a Refused code for the next begin
        self._rids = 0

    @property
    def can_send(self) -> bool:
        return self.state == "ready"

    @property
    def dead(self) -> bool:
        return self.state == "dead"

    def begin(
        self, owner: Call, tool: str, value: Any, key: str, attempt: int, deadline: float | None
    ) -> tuple[str, int]:
        if self.refuse is not None:
            code, self.refuse = self.refuse, None
            raise Refused(code, f"refused: {code}")
        self._rids += 1
        rid = f"r{self._rids}"
        self.calls[rid] = owner
        self.invokes.append((tool, value, key, attempt, deadline))
        return rid, len(str(value))

    def send_cancel(self, rid: str) -> None:
        self.cancels.append(rid)

    def kill(self, reason: str) -> None:
        if self.state == "dead":
            return
        self.state = "dead"
        self.killed = reason
        calls, self.calls = list(self.calls.values()), {}
        for call in calls:
            call.on_killed(reason, self.clock.now)

    def peak_memory_now(self, now: float | None = None) -> int | None:
        return 1234

    # what the session's reader would do with an answer
    def answer(self, rid: str) -> Call:
        return self.calls.pop(rid)


class LinePool:
    """Free sessions and a line of calls, first come first served (`CallPool`)."""

    def __init__(self, *sessions: FakeSession) -> None:
        self.free: deque[FakeSession] = deque(sessions)
        self.line: list[Call] = []
        self.released: list[str] = []
        self.retired: list[str] = []
        self.now = 0.0

    def give_now(self, taker: Call, now: float) -> bool:
        if self.line:
            return False
        while taker.waiting and self.free:
            session = self.free.popleft()
            if taker.take_slot(session, now):  # type: ignore[arg-type]
                return True
            self.release(session, now)  # type: ignore[arg-type]
        return False

    def wait_in_line(self, taker: Call) -> None:
        self.line.append(taker)

    def withdraw(self, taker: Call) -> None:
        if taker in self.line:
            self.line.remove(taker)

    def release(  # type: ignore[override]
        self, session: FakeSession, now: float | None = None
    ) -> None:
        self.released.append(session.id)
        now = session.clock.now if now is None else now
        if session.state != "ready" or session.id in self.retired:
            return
        while self.line:  # the next call in line takes it in this very step
            taker = self.line.pop(0)
            if taker.waiting and taker.take_slot(session, now):  # type: ignore[arg-type]
                return
        self.free.append(session)

    def retire(self, session: FakeSession) -> None:  # type: ignore[override]
        self.retired.append(session.id)

    def unavailable(self) -> str:
        return f"no worker became free in time ({len(self.line)} calls waiting)"


class Listening:
    """Call events are heard: each end notes the ledger's head."""

    active = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Harness:
    """A `CallHost` over a real ledger: the clock is turned by hand and `tick` hands due
    timers to their calls, as the supervisor's clock task does."""

    def __init__(self, *policies: ToolPolicy, sessions: int = 1) -> None:
        self.clock = Clock()
        self.ledger = Ledger(64, clock=self.clock)
        self.policies = {
            p.name: p for p in policies or (ToolPolicy("t", max_calls=100, max_attempts=3),)
        }
        for policy in self.policies.values():
            self.ledger.register_external_tool(policy)
        self.timers = Timers()
        self.indeterminate: list[int] = []
        self.host = CallHost(
            self.ledger,
            now=self.clock,
            event=Flag,
            arm=lambda call, when: self.timers.at(when, call) and None,
            disarm=self.timers.cancel,
            note_indeterminate=lambda call: self.indeterminate.append(call.op_id),
            audit=Listening(),
            acquire_timeout=WAIT,
            retry_backoff=BACKOFF,
        )
        self.sessions = [FakeSession(f"s{i}", self.clock) for i in range(sessions)]
        self.pool = LinePool(*self.sessions)

    def call(
        self,
        value: Any = "x",
        *,
        tool: str = "t",
        deadline: float | None = None,
        key: str | None = None,
        on_chunk: Any = None,
    ) -> Call:
        op_id = self.ledger.start(tool, value, deadline=deadline, idempotency_key=key)
        call = Call(
            self.host,
            self.pool,  # type: ignore[arg-type]
            op_id,
            tool,
            value,
            deadline=None if deadline is None else self.ledger.deadline(op_id),
            max_attempts=self.policies[tool].max_attempts,
            idempotency_key=key,
            on_chunk=on_chunk,
            created_at=self.clock.now,
        )
        call.queue(self.clock.now)
        return call

    def tick(self, to: float) -> None:
        self.clock.now = to
        for call in self.timers.due(to):
            call.on_timer(to)


def test_a_call_with_a_free_slot_is_dispatched_at_once_and_completes() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("hello")
    assert call.state == DISPATCHED and call.in_flight and call.holding
    ((tool, value, key, attempt, deadline),) = session.invokes
    assert (tool, value, attempt, deadline) == ("t", "hello", 1, None)
    assert key == call.idempotency_key and key  # the ledger's key, known once claimed
    assert h.ledger.status(call.op_id).state == "claimed"
    h.clock.now += 0.5
    session.answer("r1").on_result("HELLO", 5, h.clock.now)
    assert call.state == RESOLVED and call.done.is_set() and not call.holding
    assert h.pool.released == ["s0"] and list(h.pool.free) == [session]
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "completed" and outcome.value == "HELLO" and outcome.ok
    assert (outcome.session_id, outcome.rid, outcome.attempt) == ("s0", "r1", 1)
    assert (outcome.bytes_in, outcome.bytes_out, outcome.peak_memory) == (5, 5, 1234)
    assert outcome.run_s == pytest.approx(0.5) and outcome.queued_s == 0
    assert call.build_outcome(h.clock.now + 9) is outcome  # built once
    assert call.ledger_head == h.ledger.audit_head()  # noted at the end, for the audit
    assert h.ledger.outcome(call.op_id) is not None and h.ledger.pending_count == 0


def test_the_next_call_in_line_takes_the_freed_slot_in_the_same_step() -> None:
    h = Harness()
    (session,) = h.sessions
    first, second = h.call("a"), h.call("b")
    assert first.state == DISPATCHED and second.state == QUEUED and h.pool.line == [second]
    assert second.timer_at == 100.0 + WAIT  # the wait's limit is armed
    assert h.ledger.status(second.op_id).state == "queued"  # not claimed while in line
    session.answer("r1").on_result("A", 1, h.clock.now)
    assert first.resolved and second.state == DISPATCHED and h.pool.line == []
    assert second.timer_at is None  # no deadline: the wait's entry is dropped
    assert [i[1] for i in session.invokes] == ["a", "b"]


def test_no_free_worker_within_the_wait_fails_the_call_no_worker() -> None:
    h = Harness()
    h.call("busy")
    waiting = h.call("b")
    h.tick(100.0 + WAIT - 0.001)
    assert waiting.state == QUEUED
    h.tick(100.0 + WAIT)
    assert waiting.resolved and h.pool.line == []
    outcome = waiting.build_outcome(h.clock.now)
    assert outcome.status == "failed" and outcome.error_code == "no_worker"
    assert outcome.error is not None and "no worker became free in time" in outcome.error
    assert outcome.session_id is None and outcome.queued_s == pytest.approx(WAIT)


def test_a_deadline_that_passes_in_line_times_the_call_out_undispatched() -> None:
    h = Harness()
    h.call("busy")
    waiting = h.call("b", deadline=1.0)
    assert waiting.timer_at == 101.0  # the earlier of the wait's limit and the deadline
    h.tick(101.0)
    assert waiting.resolved and h.pool.line == []
    outcome = waiting.build_outcome(h.clock.now)
    assert outcome.status == "timed_out" and outcome.rid is None
    assert len(h.sessions[0].invokes) == 1  # never sent


def test_a_cancel_in_line_cancels_without_dispatch() -> None:
    h = Harness()
    h.call("busy")
    waiting = h.call("b")
    waiting.cancel()
    assert waiting.resolved and h.pool.line == [] and waiting.timer_at is None
    assert waiting.build_outcome(h.clock.now).status == "cancelled"
    waiting.cancel()  # once resolved, a cancel changes nothing
    assert waiting.state == RESOLVED


def test_a_cancel_in_flight_is_cooperative_and_acknowledged() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x")
    call.cancel()
    assert call.state == CANCELLING and session.cancels == ["r1"]
    assert h.ledger.status(call.op_id).state == "cancellation_requested"
    assert call.timer_at == pytest.approx(100.0 + HOST_GRACE)  # the grace, then the kill
    call.cancel()  # a second ask sends nothing more
    assert session.cancels == ["r1"]
    session.answer("r1").on_acknowledged(h.clock.now)
    assert call.resolved and call.timer_at is None and h.pool.released == ["s0"]
    assert call.build_outcome(h.clock.now).status == "cancelled"


def test_a_cancel_not_acknowledged_within_the_grace_kills_the_session() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x")
    call.cancel()
    h.tick(100.0 + HOST_GRACE - 0.001)
    assert session.killed is None and call.state == CANCELLING
    h.tick(100.0 + HOST_GRACE)
    assert session.killed == "host_cancel" and call.resolved
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "indeterminate" and outcome.kill_reason == "host_cancel"
    assert h.indeterminate == [call.op_id] and call.killed_session
    assert h.ledger.outcome(call.op_id) is None  # pending until reconciled or expired


def test_the_deadline_in_flight_sends_the_watchdogs_cancel() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x", deadline=1.0)
    assert session.invokes[0][4] == 101.0 and call.timer_at == 101.0
    h.tick(100.9)
    assert call.state == DISPATCHED
    h.tick(101.0)
    assert call.state == CANCELLING and call.cancel_reason == "deadline"
    assert session.cancels == ["r1"] and call.timer_at == pytest.approx(101.0 + GRACE)
    session.answer("r1").on_acknowledged(101.01)
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "timed_out" and outcome.error_code == "deadline"


def test_a_result_at_the_deadline_is_late_discarded_and_kills_the_session() -> None:
    h = Harness(sessions=1)
    (session,) = h.sessions
    call = h.call("x", deadline=1.0)
    h.clock.now = 101.0  # the clock's task has not run yet: the disarm judges it late
    session.answer("r1").on_result("too late", 8, h.clock.now)
    assert session.killed == "deadline" and call.resolved
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "indeterminate" and outcome.value is None
    assert outcome.kill_reason == "deadline"


def test_a_retryable_error_backs_off_and_retries_with_the_same_key() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x", key="k-1")
    session.answer("r1").on_error("busy", "try later", True, 9, h.clock.now)
    assert call.state == RETRY_WAIT and not call.holding and h.pool.released == ["s0"]
    assert call.timer_at == pytest.approx(100.0 + BACKOFF)
    h.tick(100.0 + BACKOFF)
    assert call.state == DISPATCHED and call.attempt == 2
    assert [(i[2], i[3]) for i in session.invokes] == [("k-1", 1), ("k-1", 2)]
    session.answer("r2").on_error("busy", "still", True, 5, h.clock.now)
    h.tick(h.clock.now + 2 * BACKOFF)  # the back-off doubles
    assert call.attempt == 3
    session.answer("r3").on_error("busy", "no", True, 2, h.clock.now)  # out of attempts
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "failed" and outcome.retryable and outcome.attempt == 3
    assert outcome.error == "no" and outcome.bytes_out == 16


def test_a_retryable_error_after_the_callers_cancel_ends_the_call() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x")
    call.cancel()
    session.answer("r1").on_error("busy", "try later", True, 9, h.clock.now)
    assert call.resolved and len(session.invokes) == 1  # never retried
    assert h.ledger.outcome(call.op_id) is not None  # not left claimed forever
    assert call.build_outcome(h.clock.now).status == "failed"


def test_a_cancel_during_the_back_off_cancels_at_once() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x")
    session.answer("r1").on_error("busy", "later", True, 1, h.clock.now)
    call.cancel()
    assert call.resolved and call.timer_at is None
    h.tick(h.clock.now + 1.0)
    assert len(session.invokes) == 1
    assert call.build_outcome(h.clock.now).status == "cancelled"


def test_a_session_that_dies_under_the_call_leaves_it_indeterminate() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x")
    session.termination = "memory"
    session.kill("memory")
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "indeterminate" and outcome.kill_reason == "memory"
    assert outcome.termination == "memory" and outcome.error_code == "indeterminate"
    assert h.pool.released == ["s0"] and h.indeterminate == [call.op_id]


def test_a_call_the_grant_refuses_fails_and_sends_nothing() -> None:
    h = Harness()
    (session,) = h.sessions
    session.refuse = "input_too_large"
    call = h.call("x")
    assert call.resolved and session.invokes == [] and list(h.pool.free) == [session]
    outcome = call.build_outcome(h.clock.now)
    assert outcome.status == "failed" and outcome.error_code == "input_too_large"
    assert outcome.error is not None and outcome.error.startswith("refused by the host")


def test_a_used_up_session_is_retired_and_the_call_takes_the_next() -> None:
    h = Harness(sessions=2)
    first, second = h.sessions
    first.refuse = "call_budget_exhausted"
    call = h.call("x")
    assert h.pool.retired == ["s0"] and call.state == DISPATCHED
    assert call.session is second and second.invokes[0][3] == 1  # still the first attempt


def test_chunks_reach_the_callback_in_order_and_a_failing_callback_is_dropped() -> None:
    stream = StreamPolicy(max_chunks=8, max_chunk_bytes=64, max_total_bytes=512)
    h = Harness(ToolPolicy("t", max_calls=10, stream=stream))
    (session,) = h.sessions
    seen: list[str] = []

    def on_chunk(text: str) -> None:
        seen.append(text)
        if text == "boom":
            raise RuntimeError("the caller's callback failed")

    call = h.call("x", on_chunk=on_chunk)
    for index, text in enumerate(["a", "bc", "boom", "after"]):
        call.on_chunk(index, text)
    assert seen == ["a", "bc", "boom"] and call.chunk_callback is None
    session.answer("r1").on_result("done", 4, h.clock.now)
    outcome = call.build_outcome(h.clock.now)
    assert outcome.chunks == 4 and outcome.bytes_out == 1 + 2 + 4 + 5 + 4


def test_an_expiry_sweep_that_ended_the_operation_first_has_the_last_word() -> None:
    h = Harness()
    h.call("busy")
    waiting = h.call("b", deadline=1.0)
    h.clock.now = 102.0
    h.ledger.expire_timed_out()
    h.tick(102.0)
    assert waiting.resolved
    assert waiting.build_outcome(h.clock.now).status == "timed_out"


def test_a_happening_the_table_does_not_allow_is_refused() -> None:
    h = Harness()
    call = h.call("x")
    with pytest.raises(CallStateError, match="retry cannot happen to a dispatched call"):
        call.happen("retry")
    assert call.state == DISPATCHED


def test_the_handle_reads_its_call_through_public_properties() -> None:
    h = Harness()
    (session,) = h.sessions
    call = h.call("x", key="mine")
    handle = CallHandle(call, Flag())
    assert (handle.op_id, handle.tool, handle.idempotency_key) == (call.op_id, "t", "mine")
    assert handle.call is call and not handle.done
    handle.request_cancel()
    assert call.state == CANCELLING and session.cancels == ["r1"]
    session.answer("r1").on_acknowledged(h.clock.now)
    call.build_outcome(h.clock.now)
    handle.settle()
    assert handle.done
