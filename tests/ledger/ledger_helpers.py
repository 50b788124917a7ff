"""Helpers shared by the ledger tests (imported by the test modules and conftest)."""

from __future__ import annotations

from typing import Any

from supervisor.ledger import Ledger

WALL_EPOCH = 1_700_000_000.0


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
