"""Compaction of a durable journal: what it removes, what it keeps, and that recovery,
the chain, ids and budgets carry on from its checkpoint."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ledger_helpers import FakeClock, snapshot

from supervisor.ledger import (
    AlreadyCompleted,
    AuditChainBroken,
    CallBudgetExhausted,
    Compaction,
    Completed,
    Ledger,
    LedgerError,
    OperationState,
    ToolPolicy,
)
from supervisor.ledger.core import _compaction_point

TOOL = ToolPolicy("t", max_calls=10_000, max_attempts=2)
OTHER = ToolPolicy("u", max_calls=3)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite3"


@pytest.fixture
def open_ledger(path: Path, clock: FakeClock) -> Callable[..., Ledger]:
    def make(**kwargs: Any) -> Ledger:
        ledger = Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall, **kwargs)
        ledger.register_external_tool(TOOL)
        ledger.register_external_tool(OTHER)
        return ledger

    return make


def rows(ledger: Ledger) -> dict[str, int]:
    """Rows per journal table, read through the ledger's own connection (it holds the
    journal's lock)."""
    conn = ledger._journal._conn  # type: ignore[union-attr]
    return {
        table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("events", "operations", "results")
    }


def finish(ledger: Ledger, count: int, tool: str = "t") -> list[int]:
    """``count`` operations started, claimed and completed."""
    done = []
    for i in range(count):
        op = ledger.start(tool, f"v{i}")
        ledger.claim(op)
        ledger.complete(op, f"r{i}")
        done.append(op)
    return done


def test_an_idle_ledger_compacts_to_nothing_and_continues(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    done = finish(ledger, 50)
    head = ledger.audit_head()
    report = ledger.compact(vacuum=True)
    assert report.checkpoint == head
    assert (report.events_removed, report.operations_removed) == (150, 50)
    assert rows(ledger) == {"events": 0, "operations": 0, "results": 0}
    assert ledger.verify_audit_chain() == 0
    assert ledger.verify_audit_chain(anchor=head) == 0  # the checkpoint is the anchor
    with pytest.raises(AlreadyCompleted, match="removed from the journal by compact"):
        _forget(ledger, done[0])
    op = ledger.start("t", "after")  # ids and the chain continue from the checkpoint
    assert op == done[-1] + 1
    assert ledger.audit()[-1].prev_hash == head[1]
    ledger.close()

    again = open_ledger()
    assert again.audit_head()[0] == head[0] + 1
    assert [info.id for info in again.pending()] == [op]
    assert again.status(op).call_index == 51
    assert again.verify_audit_chain() == 1
    again.close()


def _forget(ledger: Ledger, op_id: int) -> Any:
    """The outcome of a removed operation, once the ledger's memory has let it go too."""
    ledger._retained.clear()
    return ledger.outcome(op_id)


def test_compaction_names_the_operations_it_removed_and_tells_subscribers(
    open_ledger: Callable[..., Ledger],
) -> None:
    ledger = open_ledger()
    done = finish(ledger, 3)
    keys = [ledger.status(op).idempotency_key for op in done]
    mine = ledger.start("t", "mine", idempotency_key="order-7")
    ledger.claim(mine)
    ledger.complete(mine, "ok")
    pending = ledger.start("t", "still")
    heard: list[Compaction] = []
    unsubscribe = ledger.subscribe_compaction(heard.append)
    report = ledger.compact()
    assert report.removed == (*(("t", k) for k in keys), ("t", "order-7"))
    assert report.operations_removed == 4 and heard == [report]
    ledger.claim(pending)
    ledger.complete(pending, "x")
    unsubscribe()
    assert ledger.compact().operations_removed == 1 and heard == [report]


def test_pending_operations_and_everything_after_them_stay(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    early = finish(ledger, 10)
    pending = ledger.start("t", "pending")  # queued
    claimed = ledger.start("t", "claimed")
    ledger.claim(claimed)
    late = finish(ledger, 5)
    report = ledger.compact()
    # Only what ended before the oldest pending operation started is removed.
    assert report.operations_removed == len(early)
    assert report.events_removed == 3 * len(early)
    assert rows(ledger)["operations"] == 2 + len(late)
    before = snapshot(ledger)
    ledger.close()

    again = open_ledger()
    assert snapshot(again) == before  # same ids, states, call indexes, keys, counters
    assert {i.id: i.state for i in again.pending()} == {
        pending: OperationState.QUEUED,
        claimed: OperationState.CLAIMED,
    }
    assert [i.id for i in again.indeterminate()] == [claimed]  # claimed before the restart
    assert again.outcome(late[0]) == Completed("r0")  # kept: it ended after `pending` began
    with pytest.raises(AlreadyCompleted, match="compact"):
        again.outcome(early[0])
    again.close()


def test_an_operation_that_straddles_a_pending_one_is_kept_whole(
    open_ledger: Callable[..., Ledger],
) -> None:
    ledger = open_ledger()
    finish(ledger, 3)
    slow = ledger.start("t", "slow")  # ends after `pending` started
    ledger.claim(slow)
    pending = ledger.start("t", "pending")
    ledger.complete(slow, "late")
    report = ledger.compact()
    assert report.operations_removed == 3
    ledger.close()
    again = open_ledger()
    assert again.outcome(slow) == Completed("late")
    assert [i.id for i in again.pending()] == [pending]
    again.close()


def test_compacting_twice_keeps_the_call_budgets_of_removed_operations(
    open_ledger: Callable[..., Ledger],
) -> None:
    ledger = open_ledger()
    finish(ledger, 2, tool="u")  # two of the three calls of "u"
    first = ledger.compact()
    finish(ledger, 4)  # "u" has no operation left in the journal now
    second = ledger.compact()
    assert first.checkpoint is not None and second.checkpoint is not None
    assert second.checkpoint[0] > first.checkpoint[0]
    assert second.operations_removed == 4
    assert ledger.compact().events_removed == 0  # nothing more to remove
    ledger.close()

    again = open_ledger()
    op = again.start("u", "third")
    assert again.status(op).call_index == 3
    with pytest.raises(CallBudgetExhausted):
        again.start("u", "fourth")
    again.close()


def test_the_chain_is_still_checked_from_the_checkpoint(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    finish(ledger, 4)
    ledger.start("t", "pending")
    finish(ledger, 2)
    checkpoint = ledger.compact().checkpoint
    assert checkpoint is not None
    with pytest.raises(LedgerError, match="compacted away"):
        ledger.verify_audit_chain(anchor=(1, "0" * 64))
    with pytest.raises(AuditChainBroken, match="anchor"):
        ledger.verify_audit_chain(anchor=(checkpoint[0], "0" * 64))
    assert ledger.verify_audit_chain(anchor=checkpoint) == 7
    ledger.close()

    # An edit after the checkpoint is found on open, as without compaction.
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(f"UPDATE events SET detail='forged' WHERE seq={checkpoint[0] + 2}")
    conn.commit()
    conn.close()
    with pytest.raises(AuditChainBroken) as caught:
        Ledger(path=path)
    assert caught.value.seq == checkpoint[0] + 2


def test_a_moved_checkpoint_breaks_the_first_link(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    finish(ledger, 3)
    ledger.start("t", "pending")
    checkpoint = ledger.compact().checkpoint
    assert checkpoint is not None
    ledger.close()
    conn = sqlite3.connect(path)
    value = conn.execute("SELECT value FROM meta WHERE key='checkpoint'").fetchone()[0]
    conn.execute(
        "UPDATE meta SET value=? WHERE key='checkpoint'",
        (value.replace(checkpoint[1], "f" * 64),),
    )
    conn.commit()
    conn.close()
    with pytest.raises(AuditChainBroken, match="does not follow"):
        Ledger(path=path)


def test_the_guards_are_back_after_a_compaction(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    finish(ledger, 3)
    ledger.start("t", "pending")
    finish(ledger, 1)  # a row left in every table
    ledger.compact()
    ledger.close()
    conn = sqlite3.connect(path)
    for statement in ("DELETE FROM events", "DELETE FROM operations", "DELETE FROM results"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    conn.close()


def test_vacuum_gives_the_space_back(open_ledger: Callable[..., Ledger], path: Path) -> None:
    ledger = open_ledger()
    for _ in range(10):
        with ledger.batch():
            finish(ledger, 200)
    big = size(path)
    assert ledger.compact().operations_removed == 2000
    assert ledger.compact(vacuum=True).operations_removed == 0  # the vacuum alone
    assert size(path) < big / 4
    ledger.close()


def size(path: Path) -> int:
    """The journal's bytes on disk, its write-ahead log included."""
    wal = Path(f"{path}-wal")
    return os.path.getsize(path) + (os.path.getsize(wal) if wal.exists() else 0)


def test_compaction_is_refused_inside_a_batch_and_is_a_no_op_in_memory(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ledger = open_ledger()
    with ledger.batch():
        finish(ledger, 2)
        with pytest.raises(LedgerError, match="inside a batch"):
            ledger.compact()
    assert ledger.compact().operations_removed == 2
    ledger.close()
    memory = Ledger(clock=clock.monotonic)
    memory.register_external_tool(TOOL)
    finish(memory, 3)
    report = memory.compact()
    assert (report.checkpoint, report.events_removed, report.operations_removed) == (None, 0, 0)


@pytest.mark.parametrize(
    ("spans", "live", "head", "expected"),
    [
        ([], set(), 0, 0),
        ([(1, 1, 3), (2, 4, 6)], set(), 6, 6),
        ([(1, 1, 3), (2, 4, 6)], {2}, 6, 3),
        ([(1, 1, 5), (2, 2, 3), (3, 6, 7)], {3}, 7, 5),
        ([(1, 1, 8), (2, 2, 3), (3, 4, 5)], {1}, 8, 0),
        ([(1, 1, 4), (2, 3, 6), (3, 7, 7)], {3}, 7, 6),
        ([(1, 1, 2), (2, 3, 9), (3, 4, 5)], set(), 9, 9),
        ([(1, 1, 2), (2, 3, 9), (3, 4, 10)], {3}, 10, 2),
    ],
)
def test_the_compaction_point_is_the_newest_seq_nothing_straddles(
    spans: list[tuple[int, int, int]], live: set[int], head: int, expected: int
) -> None:
    assert _compaction_point(spans, live, head) == expected
