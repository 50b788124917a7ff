"""Shared test configuration.

Tests that need a real sandbox skip, saying why, on a machine that cannot run one. With
``SANDVISOR_REQUIRE_SANDBOX=1`` (set by ``scripts/test`` when run as root, as in CI) such
a skip is a failure instead: there, a machine that cannot sandbox must not pass quietly.
Tests marked ``root_only`` or ``rootless_only`` run on one kind of host only (the suite
as root, `tests/rootless` as an ordinary user) and skip on the other.

Ctrl-C is Python's own in every test process: a suite started with SIGINT ignored (a
background job of a non-interactive shell gets it so) would otherwise never raise
KeyboardInterrupt in a test that interrupts itself, and pass the ignore on to every child
a test interrupts (`sandvisor demo`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Generator

import pytest

REQUIRE_SANDBOX = os.environ.get("SANDVISOR_REQUIRE_SANDBOX") == "1"
SANDBOX_WORDS = ("sandbox", "bwrap", "bubblewrap", "cgroup")
#: Markers of tests that only run as root, or only as an ordinary user: their skips are
#: expected wherever the other runs (`tests/rootless` runs the suite as such a user).
HOST_MARKERS = ("root_only", "rootless_only")


def pytest_configure(config: pytest.Config) -> None:
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_runtest_setup(item: pytest.Item) -> None:
    root = os.geteuid() == 0
    if item.get_closest_marker("root_only") is not None and not root:
        pytest.skip("runs on a root host only")
    if item.get_closest_marker("rootless_only") is not None and root:
        pytest.skip("runs as an ordinary user only (tests/rootless starts it so)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None]:
    outcome = yield
    if not REQUIRE_SANDBOX:
        return
    report: pytest.TestReport = outcome.get_result()
    if any(item.get_closest_marker(m) is not None for m in HOST_MARKERS):
        return
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if any(word in reason.lower() for word in SANDBOX_WORDS):
            report.outcome = "failed"
            report.longrepr = f"SANDVISOR_REQUIRE_SANDBOX=1 but this test was skipped: {reason}"
