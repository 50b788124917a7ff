"""The two ledger additions the supervisor relies on: a per-call deadline and caller key
on ``start``, and ``deadline(op_id)`` to arm the watchdog at exactly the ledger's instant."""

from __future__ import annotations

import pytest

from supervisor.ledger import (
    Ledger,
    PolicyError,
    TimedOut,
    ToolPolicy,
    UnknownOperation,
)

NEEDS_SANDBOX = False


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(deadline: float | None = None) -> tuple[Ledger, Clock]:
    clock = Clock()
    ledger = Ledger(clock=clock)
    ledger.register_external_tool(ToolPolicy("t", max_calls=100, deadline=deadline))
    return ledger, clock


def test_per_call_deadline_is_measured_from_start() -> None:
    ledger, clock = make()
    op = ledger.start("t", "x", deadline=2.5)
    assert ledger.deadline(op) == 102.5
    assert ledger.claim(op).remaining_deadline_ms == 2500
    clock.now = 102.5
    assert isinstance(ledger.complete(op, "late"), TimedOut)


def test_the_earlier_of_call_and_policy_deadline_applies() -> None:
    ledger, _ = make(deadline=1.0)
    assert ledger.deadline(ledger.start("t", "x", deadline=5.0)) == 101.0
    assert ledger.deadline(ledger.start("t", "x", deadline=0.5)) == 100.5
    assert ledger.deadline(ledger.start("t", "x")) == 101.0


def test_no_deadline_reads_none() -> None:
    ledger, _ = make()
    assert ledger.deadline(ledger.start("t", "x")) is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "1"])
def test_bad_deadlines_are_refused_and_change_nothing(bad: object) -> None:
    ledger, _ = make()
    with pytest.raises(PolicyError):
        ledger.start("t", "x", deadline=bad)  # type: ignore[arg-type]
    assert ledger.pending_count == 0 and len(ledger.audit()) == 0


def test_caller_key_is_used_for_every_attempt() -> None:
    ledger, _ = make()
    op = ledger.start("t", "x", idempotency_key="order-42.v1")
    assert ledger.claim(op).idempotency_key == "order-42.v1"
    assert ledger.status(op).idempotency_key == "order-42.v1"
    assert ledger.audit()[0].detail == "order-42.v1"


@pytest.mark.parametrize("bad", ["", "Upper", "sp ace", "x" * 129, 7])
def test_bad_keys_are_refused(bad: object) -> None:
    ledger, _ = make()
    with pytest.raises(PolicyError):
        ledger.start("t", "x", idempotency_key=bad)  # type: ignore[arg-type]
    assert ledger.pending_count == 0


def test_deadline_of_an_ended_operation_is_refused() -> None:
    ledger, _ = make()
    op = ledger.start("t", "x")
    ledger.cancel(op)
    with pytest.raises(Exception, match="ended"):
        ledger.deadline(op)
    with pytest.raises(UnknownOperation):
        ledger.deadline(999)


def test_expiry_can_leave_recent_deadlines_to_the_host() -> None:
    ledger, clock = make()
    old = ledger.start("t", "x", deadline=1.0)
    recent = ledger.start("t", "x", deadline=2.0)
    clock.now = 102.5
    assert ledger.expire_timed_out(before=clock.now - 1.0) == [old]
    assert isinstance(ledger.outcome(old), TimedOut) and ledger.outcome(recent) is None
    assert ledger.expire_timed_out() == [recent]
