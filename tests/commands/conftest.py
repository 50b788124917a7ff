"""Fixtures for the command tests (`sandvisor serve`, `mcp`, `script`, `tools`, the CLI):
real sandboxed workers behind each. Modules that start no sandbox say
``NEEDS_SANDBOX = False``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_gate import mark_sandboxed, skip_without_sandbox

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_sandboxed(items, HERE)


@pytest.fixture(autouse=True)
def _skip_without_sandbox(request: pytest.FixtureRequest) -> None:
    skip_without_sandbox(request)
