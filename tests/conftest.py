"""Shared test configuration.

Tests that need a real sandbox skip, saying why, on a machine that cannot run one. With
``SANDVISOR_REQUIRE_SANDBOX=1`` (set by ``scripts/test`` when run as root, as in CI) such
a skip is a failure instead: there, a machine that cannot sandbox must not pass quietly.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

REQUIRE_SANDBOX = os.environ.get("SANDVISOR_REQUIRE_SANDBOX") == "1"
SANDBOX_WORDS = ("sandbox", "bwrap", "bubblewrap", "cgroup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None]:
    outcome = yield
    if not REQUIRE_SANDBOX:
        return
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if any(word in reason.lower() for word in SANDBOX_WORDS):
            report.outcome = "failed"
            report.longrepr = f"SANDVISOR_REQUIRE_SANDBOX=1 but this test was skipped: {reason}"
