"""``await ledger.wait(op)``: the one async method, and the host's expiry tick, under trio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from supervisor.ledger import (
    AlreadyCompleted,
    Completed,
    JournalFailed,
    Ledger,
    LedgerOutcome,
    TimedOut,
    ToolPolicy,
    UnknownOperation,
)


def make(**kwargs: Any) -> Ledger:
    ledger = Ledger(clock=trio.current_time, **kwargs)
    ledger.register_external_tool(ToolPolicy("t", max_calls=50, deadline=5.0))
    return ledger


async def test_a_waiter_resumes_when_the_host_completes_without_a_pump() -> None:
    ledger = make()
    op = ledger.start("t", "x")
    results: list[LedgerOutcome] = []

    async def waiter() -> None:
        results.append(await ledger.wait(op))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert results == []
        ledger.complete(ledger.claim(op).id, "done")
    assert results == [Completed("done"), Completed("done")]


async def test_waiting_for_a_finished_operation_returns_at_once() -> None:
    ledger = make()
    op = ledger.start("t", "x")
    ledger.cancel(op)
    with trio.fail_after(1):
        assert (await ledger.wait(op)).status == "cancelled"


async def test_the_expiry_tick_resumes_a_waiter(autojump_clock: trio.testing.MockClock) -> None:
    """The supervisor's pattern: sleep until ``next_deadline()``, then expire."""
    ledger = make()
    op = ledger.start("t", "x")
    ledger.claim(op)

    async def ticker() -> None:
        while (deadline := ledger.next_deadline()) is not None:
            await trio.sleep_until(deadline)
            ledger.expire_timed_out()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        start = trio.current_time()
        assert await ledger.wait(op) == TimedOut("expired")
        assert trio.current_time() - start == pytest.approx(5.0)


async def test_a_batch_wakes_waiters_when_it_commits() -> None:
    ledger = make()
    op = ledger.start("t", "x")
    ledger.claim(op)
    woke: list[bool] = []

    async def waiter() -> None:
        await ledger.wait(op)
        woke.append(True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        with ledger.batch():
            ledger.complete(op, "y")
            await trio.testing.wait_all_tasks_blocked()
            assert woke == []
    assert woke == [True]


async def test_a_cancelled_waiter_leaves_the_operation_alone() -> None:
    ledger = make()
    op = ledger.start("t", "x")
    with trio.move_on_after(0.01):
        await ledger.wait(op)
    assert ledger.pending_count == 1
    ledger.cancel(op)
    assert (await ledger.wait(op)).status == "cancelled"


async def test_waiting_for_an_unknown_or_forgotten_operation_is_refused() -> None:
    ledger = make(retain_outcomes=1)
    with pytest.raises(UnknownOperation):
        await ledger.wait(42)
    first = ledger.start("t", "a")
    ledger.cancel(first)
    ledger.cancel(ledger.start("t", "b"))
    with pytest.raises(AlreadyCompleted, match="no longer retained"):
        await ledger.wait(first)


async def test_a_journal_failure_releases_waiters(tmp_path: Path) -> None:
    ledger = make(path=tmp_path / "j.sqlite3")
    op = ledger.start("t", "x")
    journal = ledger._journal
    assert journal is not None

    async def waiter() -> None:
        with pytest.raises(JournalFailed):
            await ledger.wait(op)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        journal._conn.close()
        with pytest.raises(JournalFailed):
            ledger.cancel(op)
