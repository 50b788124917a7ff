"""Set-up for the supervisor's tests: real sandboxed workers, real faults.

Adapter modules live in ``adapters/`` and the misbehaving protocol worker in ``fakes/``;
both directories go on ``sys.path`` so the sandbox's module binds can find them (the
host never imports them for the supervisor: only ``find_spec`` looks at them). Helpers
are in ``sv_support.py``. Tests skip, saying why, where no sandbox can be had.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
for sub in ("adapters", "fakes"):
    if str(HERE / sub) not in sys.path:
        sys.path.insert(0, str(HERE / sub))

from sandbox.errors import SandboxUnavailable  # noqa: E402
from sandbox.policy import SandboxPolicy  # noqa: E402


@functools.cache
def sandbox_problem() -> str | None:
    from sandbox.probe import require

    try:
        require(SandboxPolicy())
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def _needs_sandbox_module(module: Any) -> bool:
    """Test modules that run no sandbox say so with ``NEEDS_SANDBOX = False``."""
    return bool(getattr(module, "NEEDS_SANDBOX", True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if HERE in Path(str(item.fspath)).parents and _needs_sandbox_module(module):
            item.add_marker(pytest.mark.bwrap)
            item.add_marker(pytest.mark.cgroup)


@pytest.fixture(autouse=True)
def _needs_sandbox(request: pytest.FixtureRequest) -> None:
    if not _needs_sandbox_module(request.module):
        return
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"needs a working sandbox: {problem}")


