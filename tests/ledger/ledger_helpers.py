"""Helpers shared by the ledger tests (imported by the test modules and conftest)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from supervisor.ledger import Ledger, ReconcileStatus, RetryClass

WALL_EPOCH = 1_700_000_000.0

Transition = Callable[[Ledger, int], object]
#: Every transition of an existing operation, by name, with arguments it accepts.
TRANSITIONS: dict[str, Transition] = {
    "claim": lambda led, op: led.claim(op),
    "retry": lambda led, op: led.retry(op, RetryClass.TRANSIENT),
    "push_chunk": lambda led, op: led.push_chunk(op, "x"),
    "complete": lambda led, op: led.complete(op, "x"),
    "fail": lambda led, op: led.fail(op, "x"),
    "request_cancellation": lambda led, op: led.request_cancellation(op),
    "confirm_cancellation": lambda led, op: led.confirm_cancellation(op),
    "cancel": lambda led, op: led.cancel(op),
    "reconcile": lambda led, op: led.reconcile(op, ReconcileStatus.running()),
    "mark_indeterminate": lambda led, op: led.mark_indeterminate(op, "x"),
}
#: The transitions a queued (never claimed) operation refuses with NotClaimed.
REFUSED_WHEN_QUEUED = tuple(name for name in TRANSITIONS if name not in ("claim", "cancel"))


def transitions(names: Iterable[str]) -> list[Any]:
    """``TRANSITIONS`` as pytest parameters, each with its name as its id."""
    return [pytest.param(TRANSITIONS[name], id=name) for name in names]


class FakeClock:
    """A monotonic clock and a wall clock that advance together, by hand."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.wall_offset = WALL_EPOCH - self.now

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self.wall_offset

    def advance(self, seconds: float) -> None:
        self.now += seconds


def snapshot(ledger: Ledger) -> list[tuple[Any, ...]]:
    """What recovery must reproduce: every pending operation's lifecycle fields.
    (Claimed ones come back indeterminate, so that flag is compared separately.)"""
    return [
        (
            i.id,
            i.tool,
            i.state,
            i.call_index,
            i.attempt,
            i.idempotency_key,
            i.chunks,
            i.source_bytes,
            i.emitted_bytes,
        )
        for i in ledger.pending()
    ]


def kinds(ledger: Ledger, op_id: int | None = None) -> list[str]:
    """The audit kinds recorded (for ``op_id`` only, if given), oldest first."""
    return [str(e.kind) for e in ledger.audit() if op_id is None or e.op_id == op_id]
