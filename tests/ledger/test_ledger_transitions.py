"""Every row of the transition table (reference-splash.md 8.1, docs/ledger.md), one test
each, in memory and durable (the durable teardown also replays the journal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ledger_helpers import REFUSED_WHEN_QUEUED, TRANSITIONS, FakeClock, kinds, transitions

from supervisor.ledger import (
    AlreadyClaimed,
    AlreadyCompleted,
    CancellationNotRequested,
    CancellationRequested,
    Cancelled,
    Completed,
    DeadlineElapsed,
    Denied,
    Failed,
    InvalidOutput,
    Ledger,
    NotClaimed,
    OperationIndeterminate,
    OperationState,
    ReconcileStatus,
    RetryClass,
    RetryLimitReached,
    TimedOut,
    UnknownOperation,
)


def claimed(ledger: Ledger, tool: str = "text.echo", value: Any = "in") -> int:
    op = ledger.start(tool, value)
    assert ledger.claim(op).attempt == 1
    return op


def cancel_requested(ledger: Ledger) -> int:
    op = claimed(ledger)
    ledger.request_cancellation(op)
    return op


# -- Queued --------------------------------------------------------------------------------


def test_queued_claim_next_returns_the_full_invocation(ledger: Ledger) -> None:
    op = ledger.start("text.echo", "hello")
    inv = ledger.claim_next()
    assert inv is not None
    assert (
        inv.id,
        inv.tool,
        inv.value,
        inv.format,
        inv.call_index,
        inv.attempt,
        inv.max_attempts,
        inv.max_output_bytes,
    ) == (op, "text.echo", "hello", "text", 1, 1, 3, 65536)
    assert inv.stream is not None and inv.stream.max_chunks == 64
    assert inv.remaining_deadline_ms == 10_000
    assert inv.idempotency_key.startswith("sv-") and inv.idempotency_key.endswith(f"-{op}")
    assert ledger.status(op).state == OperationState.CLAIMED
    assert kinds(ledger, op) == ["started", "claimed"]
    assert ledger.claim_next() is None


def test_queued_claim_next_is_first_in_first_out(ledger: Ledger) -> None:
    ops = [ledger.start("text.echo", str(n)) for n in range(3)]
    claimed_ids = []
    while (inv := ledger.claim_next()) is not None:
        claimed_ids.append(inv.id)
    assert claimed_ids == ops


def test_queued_exact_claim_takes_only_that_operation(ledger: Ledger) -> None:
    first = ledger.start("text.echo", "a")
    second = ledger.start("text.echo", "b")
    assert ledger.claim(second).id == second
    assert ledger.status(first).state == OperationState.QUEUED
    inv = ledger.claim_next()
    assert inv is not None and inv.id == first


def test_stale_exact_claim_does_not_consume_another_queued_operation(ledger: Ledger) -> None:
    done = claimed(ledger)
    ledger.complete(done, "x")
    in_flight = claimed(ledger)
    waiting = ledger.start("text.echo", "w")
    with pytest.raises(AlreadyCompleted):
        ledger.claim(done)
    with pytest.raises(AlreadyClaimed):
        ledger.claim(in_flight)
    with pytest.raises(UnknownOperation):
        ledger.claim(999)
    assert ledger.status(waiting).state == OperationState.QUEUED


def test_queued_claim_after_the_deadline_is_refused_and_skipped(
    ledger: Ledger, clock: FakeClock
) -> None:
    late = ledger.start("text.echo", "late")
    clock.advance(5)
    fresh = ledger.start("text.echo", "fresh")
    clock.advance(5)
    with pytest.raises(DeadlineElapsed):
        ledger.claim(late)
    inv = ledger.claim_next()
    assert inv is not None and inv.id == fresh and inv.remaining_deadline_ms == 5000
    assert ledger.status(late).state == OperationState.QUEUED
    assert ledger.expire_timed_out() == [late]


@pytest.mark.parametrize("call", transitions(REFUSED_WHEN_QUEUED))
def test_queued_refuses_everything_but_claim_cancel_and_expiry(
    ledger: Ledger, call: Callable[[Ledger, int], object]
) -> None:
    op = ledger.start("text.echo", "q")
    before = kinds(ledger)
    with pytest.raises(NotClaimed):
        call(ledger, op)
    assert kinds(ledger) == before
    assert ledger.status(op).state == OperationState.QUEUED


def test_queued_cancel_resolves_before_dispatch(ledger: Ledger) -> None:
    op = ledger.start("text.echo", "q")
    assert ledger.cancel(op) == Cancelled("before_dispatch")
    assert ledger.claim_next() is None
    assert kinds(ledger, op) == ["started", "cancelled"]


def test_queued_expiry_times_out(ledger: Ledger, clock: FakeClock) -> None:
    op = ledger.start("text.echo", "q")
    clock.advance(9.999)
    assert ledger.expire_timed_out() == []
    clock.advance(0.001)
    assert ledger.expire_timed_out() == [op]
    assert ledger.outcome(op) == TimedOut("expired")


# -- Claimed ---------------------------------------------------------------------------


def test_claimed_retry_keeps_identity_and_is_not_requeued(ledger: Ledger) -> None:
    op = ledger.start("text.echo", "payload")
    first = ledger.claim_next()
    assert first is not None
    second = ledger.retry(op, RetryClass.RATE_LIMITED)
    assert (second.id, second.value, second.call_index, second.idempotency_key) == (
        first.id,
        first.value,
        first.call_index,
        first.idempotency_key,
    )
    assert second.attempt == 2
    assert ledger.claim_next() is None
    events = [e for e in ledger.audit() if e.kind == "retry_scheduled"]
    assert [(e.attempt, e.detail) for e in events] == [(2, "rate_limited")]
    assert ledger.retry(op, "transient").attempt == 3


def test_claimed_retry_at_the_attempt_limit_is_refused_without_audit(ledger: Ledger) -> None:
    op = claimed(ledger)
    ledger.retry(op, RetryClass.TRANSIENT)
    ledger.retry(op, RetryClass.TRANSIENT)
    before = kinds(ledger)
    with pytest.raises(RetryLimitReached):
        ledger.retry(op, RetryClass.TRANSIENT)
    assert kinds(ledger) == before
    assert ledger.complete(op, "done") == Completed("done")


def test_claimed_retry_with_default_policy_fails_at_once(ledger: Ledger) -> None:
    op = claimed(ledger, "text.once")
    with pytest.raises(RetryLimitReached):
        ledger.retry(op, RetryClass.TRANSIENT)


def test_claimed_retry_after_the_deadline_is_refused_without_audit(
    ledger: Ledger, clock: FakeClock
) -> None:
    op = claimed(ledger)
    clock.advance(10)
    before = kinds(ledger)
    with pytest.raises(DeadlineElapsed):
        ledger.retry(op, RetryClass.TRANSIENT)
    assert kinds(ledger) == before
    assert ledger.expire_timed_out() == [op]


def test_claimed_retry_reports_the_remaining_deadline(ledger: Ledger, clock: FakeClock) -> None:
    op = claimed(ledger)
    clock.advance(2.5)
    assert ledger.retry(op, RetryClass.TRANSIENT).remaining_deadline_ms == 7500


def test_claimed_complete_is_validated_and_audited(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.complete(op, "done") == Completed("done")
    event = ledger.audit()[-1]
    assert (event.kind, event.op_id, event.bytes_out) == ("completed", op, 4)
    assert ledger.pending_count == 0


def test_claimed_late_completion_becomes_timed_out(ledger: Ledger, clock: FakeClock) -> None:
    op = claimed(ledger)
    clock.advance(10)  # no expiry tick ran
    assert ledger.complete(op, "done") == TimedOut("late_result")
    assert kinds(ledger, op)[-1] == "timed_out"


def test_claimed_late_failure_becomes_timed_out(ledger: Ledger, clock: FakeClock) -> None:
    op = claimed(ledger)
    clock.advance(11)
    assert ledger.fail(op, "boom") == TimedOut("late_failure")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"sum": "three"}, "contract violation at $.sum: type"),
        ({"total": 3}, "contract violation at $: required"),
        ([1, 2], "contract violation at $: type"),
        ("text", "a json payload must be an object or an array"),
        (7, "a json payload must be an object or an array"),
        ({"sum": 1, "pad": "x" * 80}, "over max_output_bytes 64"),
    ],
)
def test_claimed_invalid_output_is_denied(ledger: Ledger, value: Any, reason: str) -> None:
    op = claimed(ledger, "json.calc", {"a": 1})
    outcome = ledger.complete(op, value)
    assert isinstance(outcome, Denied) and reason in outcome.reason
    assert outcome.status == "failed"
    assert kinds(ledger, op)[-1] == "denied"
    with pytest.raises(AlreadyCompleted):
        ledger.complete(op, {"sum": 3})


def test_claimed_json_completion_uses_the_registered_contract(ledger: Ledger) -> None:
    op = claimed(ledger, "json.calc", {"a": 1, "b": 2})
    assert ledger.complete(op, {"sum": 3}) == Completed({"sum": 3})


def test_claimed_text_output_over_the_limit_is_denied(ledger_factory: Any) -> None:
    from supervisor.ledger import ToolPolicy

    led = ledger_factory()
    led.register_external_tool(ToolPolicy("t", max_output_bytes=4))
    op = claimed(led, "t")
    assert led.complete(op, "ééé") == Denied("output is 6 bytes, over max_output_bytes 4")


def test_claimed_fail_is_terminal(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.fail(op, "adapter_error: boom") == Failed("adapter_error: boom")
    assert ledger.outcome(op) == Failed("adapter_error: boom")
    assert kinds(ledger, op)[-1] == "failed"


def test_claimed_fail_message_is_bounded(ledger: Ledger) -> None:
    op = claimed(ledger)
    outcome = ledger.fail(op, "é" * 5000)
    assert isinstance(outcome, Failed) and len(outcome.message.encode()) <= 4096
    assert len(ledger.audit()[-1].detail.encode()) <= 256


def test_claimed_request_cancellation_returns_the_binding(ledger: Ledger) -> None:
    op = claimed(ledger)
    inv_key = ledger.status(op).idempotency_key
    ticket = ledger.request_cancellation(op)
    assert (ticket.id, ticket.tool, ticket.call_index, ticket.attempt, ticket.idempotency_key) == (
        op,
        "text.echo",
        1,
        1,
        inv_key,
    )
    assert not hasattr(ticket, "value")
    assert ledger.status(op).state == OperationState.CANCELLATION_REQUESTED
    assert kinds(ledger, op)[-1] == "cancellation_requested"


def test_claimed_confirm_without_request_is_refused(ledger: Ledger) -> None:
    op = claimed(ledger)
    with pytest.raises(CancellationNotRequested):
        ledger.confirm_cancellation(op)
    assert ledger.status(op).state == OperationState.CLAIMED


def test_claimed_direct_cancel_is_a_terminal_assertion(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.cancel(op) == Cancelled("asserted")
    with pytest.raises(AlreadyCompleted):
        ledger.complete(op, "late")


def test_claimed_expiry_times_out(ledger: Ledger, clock: FakeClock) -> None:
    op = claimed(ledger)
    other = claimed(ledger, "text.once")
    assert ledger.next_deadline() == clock.now + 10
    clock.advance(10)
    assert ledger.expire_timed_out() == [op]
    assert ledger.outcome(op) == TimedOut("expired")
    assert ledger.status(other).state == OperationState.CLAIMED
    assert ledger.next_deadline() is None


def test_claimed_reconcile_running_keeps_it_pending(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.reconcile(op, ReconcileStatus.running()) is None
    assert ledger.status(op).state == OperationState.CLAIMED
    assert [e.detail for e in ledger.audit() if e.kind == "reconcile_observed"] == ["running"]


def test_claimed_reconcile_running_after_the_deadline_is_refused(
    ledger: Ledger, clock: FakeClock
) -> None:
    op = claimed(ledger)
    clock.advance(10)
    with pytest.raises(DeadlineElapsed):
        ledger.reconcile(op, ReconcileStatus.running())
    assert ledger.expire_timed_out() == [op]


def test_claimed_reconcile_unknown_keeps_it_pending(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.reconcile(op, ReconcileStatus.unknown()) is None
    assert ledger.status(op).state == OperationState.CLAIMED


def test_claimed_reconcile_succeeded_completes_with_validation(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.reconcile(op, ReconcileStatus.succeeded("done")) == Completed("done")
    json_op = claimed(ledger, "json.calc", {"a": 1})
    outcome = ledger.reconcile(json_op, ReconcileStatus.succeeded({"sum": "x"}, "json"))
    assert isinstance(outcome, Denied)


def test_claimed_reconcile_succeeded_after_the_deadline_times_out(
    ledger: Ledger, clock: FakeClock
) -> None:
    op = claimed(ledger)
    clock.advance(10)
    assert ledger.reconcile(op, ReconcileStatus.succeeded("x")) == TimedOut("late_reconciliation")


def test_claimed_reconcile_with_a_mismatched_format_changes_nothing(ledger: Ledger) -> None:
    op = claimed(ledger)
    before = kinds(ledger)
    with pytest.raises(InvalidOutput):
        ledger.reconcile(op, ReconcileStatus.succeeded({"a": 1}, "json"))
    assert kinds(ledger) == before
    assert ledger.status(op).state == OperationState.CLAIMED


def test_claimed_reconcile_failed_and_cancelled_resolve(ledger: Ledger) -> None:
    failed = claimed(ledger)
    assert ledger.reconcile(failed, ReconcileStatus.failed("boom")) == Failed("boom")
    cancelled = claimed(ledger)
    assert ledger.reconcile(cancelled, ReconcileStatus.cancelled()) == Cancelled("reconciled")


def test_claimed_operations_complete_in_any_order_within_the_bound(ledger_factory: Any) -> None:
    from supervisor.ledger import PendingLimitReached, ToolPolicy

    led = ledger_factory(max_pending=3)
    led.register_external_tool(ToolPolicy("t", max_calls=10))
    ops = [claimed(led, "t", str(n)) for n in range(3)]
    with pytest.raises(PendingLimitReached):
        led.start("t", "over")
    for op in reversed(ops):
        assert led.complete(op, f"r{op}") == Completed(f"r{op}")
    assert led.pending_count == 0
    led.start("t", "room again")


# -- Indeterminate (claimed or cancellation requested, outcome unknown) ----------------


def test_indeterminate_stays_pending_and_is_listed(ledger: Ledger) -> None:
    op = claimed(ledger)
    ledger.mark_indeterminate(op, "watchdog deadline")
    ledger.mark_indeterminate(op, "again")  # idempotent
    assert kinds(ledger, op) == ["started", "claimed", "indeterminate"]
    assert [e.detail for e in ledger.audit() if e.kind == "indeterminate"] == ["watchdog deadline"]
    assert [i.id for i in ledger.indeterminate()] == [op]
    assert ledger.pending_count == 1
    assert ledger.claim_next() is None


@pytest.mark.parametrize("call", transitions(("retry", "push_chunk", "complete")))
def test_indeterminate_is_never_redispatched_or_completed_directly(
    ledger: Ledger, call: Callable[[Ledger, int], object]
) -> None:
    op = claimed(ledger)
    ledger.mark_indeterminate(op, "session poisoned")
    with pytest.raises(OperationIndeterminate):
        call(ledger, op)


def test_indeterminate_cancellation_is_never_confirmed(ledger: Ledger) -> None:
    op = cancel_requested(ledger)
    ledger.mark_indeterminate(op, "killed")
    with pytest.raises(OperationIndeterminate):
        ledger.confirm_cancellation(op)
    assert ledger.reconcile(op, ReconcileStatus.cancelled()) == Cancelled("reconciled")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda led, op: led.reconcile(op, ReconcileStatus.succeeded("r")), Completed("r")),
        (lambda led, op: led.fail(op, "policy"), Failed("policy")),
        (lambda led, op: led.cancel(op), Cancelled("asserted")),
    ],
    ids=["reconcile", "fail", "cancel"],
)
def test_indeterminate_resolves_by_reconcile_fail_or_cancel(
    ledger: Ledger, call: Callable[[Ledger, int], object], expected: object
) -> None:
    op = claimed(ledger)
    ledger.mark_indeterminate(op, "eof")
    assert call(ledger, op) == expected
    assert ledger.indeterminate() == ()


def test_indeterminate_expires(ledger: Ledger, clock: FakeClock) -> None:
    op = claimed(ledger)
    ledger.mark_indeterminate(op, "eof")
    clock.advance(10)
    assert ledger.expire_timed_out() == [op]


# -- Cancellation requested ------------------------------------------------------------


def test_cancellation_requested_again_is_idempotent(ledger: Ledger) -> None:
    op = claimed(ledger)
    first = ledger.request_cancellation(op)
    before = kinds(ledger)
    assert ledger.request_cancellation(op) == first
    assert kinds(ledger) == before


@pytest.mark.parametrize("call", transitions(("retry", "push_chunk")))
def test_cancellation_requested_refuses_retry_and_chunks(
    ledger: Ledger, call: Callable[[Ledger, int], object]
) -> None:
    op = cancel_requested(ledger)
    before = kinds(ledger)
    with pytest.raises(CancellationRequested):
        call(ledger, op)
    assert kinds(ledger) == before


def test_cancellation_requested_result_wins_the_race(ledger: Ledger) -> None:
    op = cancel_requested(ledger)
    assert ledger.complete(op, "won") == Completed("won")
    with pytest.raises(AlreadyCompleted):
        ledger.confirm_cancellation(op)


def test_cancellation_requested_confirm_cancels_once(ledger: Ledger) -> None:
    op = cancel_requested(ledger)
    assert ledger.confirm_cancellation(op) == Cancelled("confirmed")
    assert kinds(ledger, op) == ["started", "claimed", "cancellation_requested", "cancelled"]
    with pytest.raises(AlreadyCompleted):
        ledger.complete(op, "late")
    with pytest.raises(AlreadyCompleted):
        ledger.confirm_cancellation(op)


def test_cancellation_requested_confirm_after_the_deadline_times_out(
    ledger: Ledger, clock: FakeClock
) -> None:
    op = cancel_requested(ledger)
    clock.advance(10)
    assert ledger.confirm_cancellation(op) == TimedOut("late_cancellation")


def test_cancellation_requested_expires(ledger: Ledger, clock: FakeClock) -> None:
    op = cancel_requested(ledger)
    clock.advance(10)
    assert ledger.expire_timed_out() == [op]


def test_cancellation_requested_reconciles(ledger: Ledger) -> None:
    op = cancel_requested(ledger)
    assert ledger.reconcile(op, ReconcileStatus.running()) is None
    assert ledger.status(op).state == OperationState.CANCELLATION_REQUESTED
    assert ledger.reconcile(op, ReconcileStatus.cancelled()) == Cancelled("reconciled")


# -- Resolved --------------------------------------------------------------------------


@pytest.mark.parametrize("call", transitions(TRANSITIONS))
@pytest.mark.parametrize("how", ["completed", "failed", "cancelled", "timed_out", "denied"])
def test_resolved_refuses_everything(
    ledger: Ledger, clock: FakeClock, how: str, call: Callable[[Ledger, int], object]
) -> None:
    op = claimed(ledger, "json.calc", {"a": 1}) if how == "denied" else claimed(ledger)
    if how == "completed":
        ledger.complete(op, "r")
    elif how == "failed":
        ledger.fail(op, "f")
    elif how == "cancelled":
        ledger.cancel(op)
    elif how == "denied":
        ledger.complete(op, [])
    else:
        clock.advance(10)
        ledger.expire_timed_out()
    terminal = [e for e in ledger.audit() if e.op_id == op][-1]
    with pytest.raises(AlreadyCompleted):
        call(ledger, op)
    assert ledger.audit()[-1] == terminal
    assert ledger.expire_timed_out() == []


def test_unknown_ids_are_refused(ledger: Ledger) -> None:
    for bad in (0, -1, 5, "1", None):
        with pytest.raises(UnknownOperation):
            ledger.complete(bad, "x")  # type: ignore[arg-type]
        with pytest.raises(UnknownOperation):
            ledger.outcome(bad)  # type: ignore[arg-type]


def test_bookkeeping_stays_bounded_over_many_operations(ledger_factory: Any) -> None:
    """Stale queue and deadline entries are dropped, not accumulated."""
    from supervisor.ledger import ToolPolicy

    led = ledger_factory(max_pending=8, retain_outcomes=4)
    led.register_external_tool(ToolPolicy("t", max_calls=10_000, deadline=60.0))
    held = led.start("t", "held")  # stays queued at the front the whole time
    for n in range(300):
        op = led.start("t", str(n))
        led.claim(op) if n % 2 else led.cancel(op)
        if n % 2:
            led.complete(op, "r")
    assert len(led._queue) <= 2 * led._queued + 33
    assert len(led._deadlines) <= 2 * led.pending_count + 65
    assert len(led._retained) == 4
    inv = led.claim_next()
    assert inv is not None and inv.id == held


def test_a_result_that_is_not_valid_unicode_is_denied(ledger: Ledger) -> None:
    op = claimed(ledger)
    assert ledger.complete(op, "\udc80") == Denied("text is not valid Unicode (lone surrogate)")
