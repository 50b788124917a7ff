"""The worker driver's threads: a call runs on the thread that read it, a standby takes
over the reading, frames queued behind a call that may be slow run concurrently, and the
number of threads stays bounded. A real worker subprocess, timed from the host side."""

from __future__ import annotations

import time
from typing import Any

import psutil
from worker_harness import WorkerProcess

from worker_runtime.driver import QUICK_STREAK, TAKEOVER_AFTER
from worker_runtime.protocol.host import CancelAcknowledged, ResultReceived
from worker_runtime.protocol.messages import grant


def _rid(event: Any) -> str:
    assert isinstance(event, ResultReceived), event
    return event.rid


def _close(w: WorkerProcess) -> None:
    w.send(w.conn.close())
    assert w.read_eof() == []
    w.conn.receive_eof()
    assert w.wait() == 0


def _invoke_line(w: WorkerProcess, tool: str, value: str) -> tuple[str, bytes]:
    return w.conn.invoke(tool, value, idempotency_key=f"key-{w.conn.ids_used + 1}")


def test_frames_written_behind_a_slow_call_run_at_once() -> None:
    """One write: a 0.5 s call, then a quick one. The quick result comes first and long
    before the slow call ends: nothing written behind a slow call waits for it (whether
    the reader hands its role over at once or the standby takes over is not told apart
    here: both are well inside the limit)."""
    with WorkerProcess([grant("sleep"), grant("text.upper")], max_in_flight=2) as w:
        w.handshake()
        slow, first = _invoke_line(w, "sleep", "0.5")
        quick, second = _invoke_line(w, "text.upper", "q")
        began = time.monotonic()
        w.send(first + second)
        assert _rid(w.next_event()) == quick
        assert time.monotonic() - began < 0.4
        assert _rid(w.next_event()) == slow
        _close(w)


def test_a_cancel_right_behind_an_inline_call_is_read_by_the_standby() -> None:
    """The cancel arrives before the takeover threshold; the standby takes over the
    reading within a few milliseconds and the adapter acknowledges."""
    with WorkerProcess([grant("sleep")]) as w:
        w.handshake()
        rid = w.invoke("sleep", "30")
        began = time.monotonic()
        w.cancel(rid)
        event = w.next_event()
        assert isinstance(event, CancelAcknowledged) and event.rid == rid
        assert time.monotonic() - began < 1.0
        _close(w)


def test_a_quick_tool_then_a_slow_one_behind_it_still_runs_concurrently() -> None:
    """After a streak of quick calls (which the driver may run inline), a slow call behind
    a quick one still does not hold up the quick one after it."""
    with WorkerProcess(
        [grant("text.upper", max_calls=QUICK_STREAK + 2), grant("sleep")], max_in_flight=3
    ) as w:
        w.handshake()
        for _ in range(QUICK_STREAK):
            w.invoke("text.upper", "warm")
            _rid(w.next_event())
        _, a = _invoke_line(w, "text.upper", "a")
        slow, b = _invoke_line(w, "sleep", "0.5")
        last, c = _invoke_line(w, "text.upper", "c")
        began = time.monotonic()
        w.send(a + b + c)
        rids = [_rid(e) for e in w.events(3)]
        assert rids[-1] == slow and time.monotonic() - began >= 0.5
        assert last in rids[:2]
        _close(w)


def test_threads_stay_bounded_over_calls_that_outlive_the_takeover() -> None:
    """Alternate calls longer than the takeover with quick ones: roles rotate between
    the same few threads instead of piling up new ones."""
    calls = 20
    with WorkerProcess(
        [grant("sleep", max_calls=calls), grant("text.upper", max_calls=calls)]
    ) as w:
        w.handshake()
        pause = str(TAKEOVER_AFTER * 5)
        for _ in range(calls):
            w.invoke("sleep", pause)
            _rid(w.next_event())
            w.invoke("text.upper", "x")
            _rid(w.next_event())
        # main thread, reader, standby, and at most one parked spare
        assert psutil.Process(w.proc.pid).num_threads() <= 4
        _close(w)
