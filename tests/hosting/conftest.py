"""Fixtures for the hosting tests: real sandboxed workers behind asyncio, threads, the
command line and MCP. Modules that start no sandbox say ``NEEDS_SANDBOX = False``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from hosting_helpers import sandbox_problem  # noqa: E402


def _needs_sandbox(module: object) -> bool:
    return bool(getattr(module, "NEEDS_SANDBOX", True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents and _needs_sandbox(item.module):  # type: ignore[attr-defined]
            item.add_marker(pytest.mark.bwrap)
            item.add_marker(pytest.mark.cgroup)


@pytest.fixture(autouse=True)
def _skip_without_sandbox(request: pytest.FixtureRequest) -> None:
    if not _needs_sandbox(request.module):
        return
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"needs a working sandbox: {problem}")
