"""Many calls with random deadlines, cancellations and crashes, checking the invariants:
every call ends in exactly one outcome (and one audit event, and one ledger lifecycle),
nothing of any sandbox survives, no fd leaks, host memory stays bounded."""

from __future__ import annotations

import gc
import random
from collections import Counter

import pytest
import trio
from sv_support import assert_no_survivors, fd_table, fds_opened, rss, supervisor

from supervisor.ledger.audit import TERMINAL_KINDS
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.outcome import STATUSES
from supervisor.workers.supervisor import Supervisor

MiB = 1024 * 1024


def pick(rng: random.Random, crash_rate: float) -> tuple[str, str, float | None]:
    """A random call: mostly quick ones, some slow, a few that hang or crash."""
    roll = rng.random()
    if roll < crash_rate:
        return "suicide", "", 5.0
    if roll < 2 * crash_rate:
        return "hang", "", rng.uniform(0.05, 0.3)
    if roll < 0.25:
        return "sleep", f"{rng.uniform(0, 0.05):.3f}", rng.choice([None, rng.uniform(0.01, 0.1)])
    if roll < 0.30:
        return "fail", "no", None
    return "echo", str(rng.random()), rng.choice([None, 5.0])


async def drive(
    sup: Supervisor,
    rng: random.Random,
    calls: int,
    workers: int,
    crash_rate: float,
    cancel_rate: float,
) -> tuple[Counter[str], int]:
    statuses: Counter[str] = Counter()
    cancelled = 0
    remaining = calls

    async def worker(seed: int) -> None:
        nonlocal remaining, cancelled
        local = random.Random(seed)
        while remaining > 0:
            remaining -= 1
            tool, value, deadline = pick(local, crash_rate)
            cancel_after = local.uniform(0, 0.05) if local.random() < cancel_rate else None
            if cancel_after is None:
                out = await sup.invoke(tool, value, deadline=deadline)
                assert out.status in STATUSES
                statuses[out.status] += 1
                if tool == "echo":  # or it shared a session that was killed
                    assert out.status in ("completed", "indeterminate")
                    assert out.status == "indeterminate" or out.value == value
                continue
            with trio.move_on_after(cancel_after) as scope:
                out = await sup.invoke(tool, value, deadline=deadline)
                statuses[out.status] += 1
            if scope.cancelled_caught:
                cancelled += 1

    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(worker, rng.randrange(2**32))
    return statuses, cancelled


def check_invariants(sup: Supervisor, events: list[CallEvent], calls: int) -> None:
    assert len(events) == calls, "one audit event per call"
    assert len({e.op_id for e in events}) == calls, "one event per operation"
    ops: dict[int, list[str]] = {}
    for e in sup.ledger.audit():
        ops.setdefault(e.op_id, []).append(e.kind)
    for event in events:
        kinds = ops.get(event.op_id)
        if kinds is None:  # fell out of the ledger's ring: only the newest are kept
            continue
        terminals = sum(k in TERMINAL_KINDS for k in kinds)
        assert terminals <= 1, f"op {event.op_id}: {kinds}"
        if terminals == 0:
            assert event.status == "indeterminate" and "indeterminate" in kinds
        assert kinds.count("claimed") <= 1, "never re-dispatched"
    for info in sup.ledger.pending():
        assert info.indeterminate, f"pending but not indeterminate: {info}"


async def test_random_cancellations_under_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("supervisor.workers.pool.HISTORY", 10_000)
    events: list[CallEvent] = []
    rng = random.Random(1234)
    async with supervisor(pool_size=2, max_in_flight=2, on_audit=events.append) as sup:
        statuses, cancelled = await drive(
            sup, rng, calls=600, workers=8, crash_rate=0.0, cancel_rate=0.5
        )
        check_invariants(sup, events, 600)
    # A cancel lands mid-call when it comes before the call's end: for the sleeps about
    # half of them whatever the speed, for quick calls only as often as the host is slow.
    # On an endlessly fast host 36 of the 600 calls are expected (sd 6, never 15 or fewer
    # in 2,000 simulated runs; 81% of them 40 or fewer), here 57-66 at load 2.
    assert cancelled > 15 and sum(statuses.values()) + cancelled == 600


@pytest.mark.slow
async def test_soak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("supervisor.workers.pool.HISTORY", 10_000)
    async with supervisor() as warm:  # the sandbox's one-time fd plugs
        await warm.invoke("echo", "x")
    gc.collect()
    fds, memory = fd_table(), rss()
    events: list[CallEvent] = []
    rng = random.Random(20261130)
    calls = 2500
    sup = Supervisor(
        adapters=["sv_test_adapters:registry"], pool_size=2, max_in_flight=2,
        on_audit=events.append, ping_interval=None, max_calls_per_worker=200,
    )  # fmt: skip
    async with sup:
        statuses, cancelled = await drive(
            sup, rng, calls=calls, workers=8, crash_rate=0.008, cancel_rate=0.1
        )
        check_invariants(sup, events, calls)
        assert statuses["completed"] > calls // 2
        # cancels that land mid-call: about 30 of the 250 timed ones even on an endlessly
        # fast host (see test_random_cancellations_under_load), more on a slower one
        assert statuses["indeterminate"] > 5 and cancelled > 10
        assert sup.pool.replaced_sessions > 5
    assert_no_survivors(sup)
    assert len(sup.pool.history) >= sup.pool.started_sessions - 2  # two may die unstarted
    gc.collect()
    assert not fds_opened(fds, fd_table())
    assert rss() - memory < 48 * MiB
