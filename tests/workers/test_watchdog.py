"""The watchdog's rules (sans-IO), every case: deadline, cancel reason, terminal kind."""

from __future__ import annotations

import math

import pytest

from supervisor.workers.watchdog import CallWatch

NEEDS_SANDBOX = False


@pytest.mark.parametrize("kind", ["result", "error"])
@pytest.mark.parametrize(
    ("deadline", "now", "verdict"),
    [
        (None, 1e9, "accept"),
        (10.0, 9.999, "accept"),
        (10.0, 10.0, "late"),  # at the deadline is already late (now >= deadline)
        (10.0, 11.0, "late"),
    ],
)
@pytest.mark.parametrize("cancel", [None, "host_cancel", "deadline"])
def test_results_and_errors(
    kind: str, deadline: float | None, now: float, verdict: str, cancel: str | None
) -> None:
    watch = CallWatch(deadline)
    if cancel is not None:
        watch.begin_cancel(cancel, now - 0.001, 0.02)  # type: ignore[arg-type]
    assert watch.judge(kind, now) == verdict  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("deadline", "now", "cancel", "verdict"),
    [
        (None, 5.0, "host_cancel", "cancelled"),
        (10.0, 9.0, "host_cancel", "cancelled"),
        (10.0, 10.0, "host_cancel", "timed_out"),  # the deadline passed meanwhile
        (10.0, 10.01, "deadline", "timed_out"),
        (None, 5.0, "deadline", "timed_out"),
    ],
)
def test_acknowledgements(deadline: float | None, now: float, cancel: str, verdict: str) -> None:
    watch = CallWatch(deadline)
    watch.begin_cancel(cancel, now - 0.001, 0.02)  # type: ignore[arg-type]
    assert watch.judge("acknowledged", now) == verdict


def test_wake_times_and_grace() -> None:
    watch = CallWatch(10.0)
    assert watch.wake_at() == 10.0 and not watch.due(9.99) and watch.due(10.0)
    assert watch.begin_cancel("deadline", 10.0, 0.02) == pytest.approx(10.02)
    assert watch.wake_at() == pytest.approx(10.02)
    # a second cancel (e.g. the caller's, during the watchdog's grace) keeps the first
    assert watch.begin_cancel("host_cancel", 10.01, 5.0) == pytest.approx(10.02)
    assert watch.cancel_reason == "deadline"
    assert CallWatch(None).wake_at() == math.inf and not CallWatch(None).due(1e18)


def test_nan_deadline_is_refused() -> None:
    with pytest.raises(ValueError):
        CallWatch(float("nan"))
