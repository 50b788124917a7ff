"""Fixtures for the hosting tests: real sandboxed workers behind asyncio, threads, the
command line and MCP. Modules that start no sandbox say ``NEEDS_SANDBOX = False``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from sandbox_gate import mark_sandboxed, skip_without_sandbox  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_sandboxed(items, HERE)


@pytest.fixture(autouse=True)
def _skip_without_sandbox(request: pytest.FixtureRequest) -> None:
    skip_without_sandbox(request)
