"""The gate of the test directories whose tests start real sandboxes (workers,
hosting, commands): their items are marked ``bwrap`` and ``cgroup``, and they skip, saying why,
where no sandbox can be had (a failure under ``SANDVISOR_REQUIRE_SANDBOX=1``, see
``conftest.py``). A module that starts no sandbox says ``NEEDS_SANDBOX = False``."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def sandbox_problem() -> str | None:
    """Why the default policy cannot run here, or None."""
    from sandbox.errors import SandboxUnavailable
    from sandbox.gate import require
    from sandbox.policy import SandboxPolicy

    try:
        require(SandboxPolicy())
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def needs_sandbox(module: object) -> bool:
    return bool(getattr(module, "NEEDS_SANDBOX", True))


def mark_sandboxed(items: list[pytest.Item], directory: Path) -> None:
    """Mark the items collected under ``directory`` that need a sandbox."""
    for item in items:
        module = getattr(item, "module", None)
        if directory in Path(str(item.fspath)).parents and needs_sandbox(module):
            item.add_marker(pytest.mark.bwrap)
            item.add_marker(pytest.mark.cgroup)


def skip_without_sandbox(request: pytest.FixtureRequest) -> None:
    if needs_sandbox(request.module) and (problem := sandbox_problem()) is not None:
        pytest.skip(f"needs a working sandbox: {problem}")
