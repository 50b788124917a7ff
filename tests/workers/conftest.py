"""Set-up for the supervisor's tests: real sandboxed workers, real faults.

Adapter modules live in ``adapters/`` and the misbehaving protocol worker in ``fakes/``;
both directories go on ``sys.path`` so the sandbox's module binds can find them (the
host never imports them for the supervisor: only ``find_spec`` looks at them). Helpers
are in ``sv_support.py``. Tests skip, saying why, where no sandbox can be had.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for sub in ("adapters", "fakes"):
    if str(HERE / sub) not in sys.path:
        sys.path.insert(0, str(HERE / sub))

from sandbox_gate import mark_sandboxed, skip_without_sandbox  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_sandboxed(items, HERE)


@pytest.fixture(autouse=True)
def _needs_sandbox(request: pytest.FixtureRequest) -> None:
    skip_without_sandbox(request)
