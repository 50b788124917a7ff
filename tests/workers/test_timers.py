"""The clock of every call (sans-IO): entries come due in order and once, a call's new
entry replaces its old one, stale entries are skipped and compacted away."""

from __future__ import annotations

import math

from supervisor.workers.timers import Timers

NEEDS_SANDBOX = False


class Probe:
    def __init__(self, name: str) -> None:
        self.name = name
        self.timer_at: float | None = None
        self.seen: list[float] = []

    def on_timer(self, now: float) -> None:
        self.seen.append(now)


def test_entries_come_due_in_order_and_once() -> None:
    timers = Timers()
    a, b, c = Probe("a"), Probe("b"), Probe("c")
    timers.at(3.0, c)
    timers.at(1.0, a)
    timers.at(2.0, b)
    assert timers.next_at() == 1.0
    assert timers.due(0.5) == []
    assert [p.name for p in timers.due(2.0)] == ["a", "b"]  # type: ignore[attr-defined]
    assert a.timer_at is None and b.timer_at is None and c.timer_at == 3.0
    assert timers.due(2.5) == [] and timers.next_at() == 3.0
    assert timers.due(10.0) == [c] and timers.next_at() == math.inf
    assert timers.live == 0


def test_a_new_entry_replaces_the_old_one() -> None:
    timers = Timers()
    call = Probe("x")
    timers.at(5.0, call)
    timers.at(1.0, call)  # e.g. dispatched: the deadline replaces the wait's limit
    assert timers.live == 1
    assert timers.due(1.0) == [call]
    assert timers.due(5.0) == []  # the replaced entry is stale
    timers.at(7.0, call)
    timers.at(7.0, call)  # the same instant again: one entry
    assert len(timers) == 1


def test_a_cancelled_entry_never_comes_due() -> None:
    timers = Timers()
    call, other = Probe("x"), Probe("y")
    timers.at(1.0, call)
    timers.at(2.0, other)
    timers.cancel(call)
    timers.cancel(call)  # twice is harmless
    assert timers.live == 1 and timers.next_at() == 2.0
    assert timers.due(5.0) == [other]


def test_an_earlier_entry_is_reported_so_the_clock_wakes_sooner() -> None:
    timers = Timers()
    assert timers.at(5.0, Probe("a")) is True  # the only one
    assert timers.at(9.0, Probe("b")) is False
    assert timers.at(1.0, Probe("c")) is True


def test_stale_entries_are_compacted_away() -> None:
    timers = Timers()
    keep = Probe("keep")
    timers.at(1e9, keep)
    for i in range(10_000):  # calls that ended before their deadline
        call = Probe(str(i))
        timers.at(100.0 + i, call)
        timers.cancel(call)
    assert len(timers) <= 2 * timers.live + 64
    assert timers.live == 1 and timers.next_at() == 1e9
