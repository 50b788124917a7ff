"""Sandbox tests: integration tests (marked ``bwrap``/``cgroup``) skip with the probe's
reason where the machine cannot run real sandboxes; on the CI machine they all run."""

from __future__ import annotations

from functools import cache

import pytest

from sandbox.errors import SandboxUnavailable
from sandbox.gate import require
from sandbox.policy import SandboxPolicy


@cache
def _unavailable(needs_cgroups: bool) -> str | None:
    policy = SandboxPolicy() if needs_cgroups else SandboxPolicy(memory_bytes=None, pids=None)
    try:
        require(policy)
    except SandboxUnavailable as exc:
        return f"{exc} (see `sandvisor doctor`)"
    return None


@pytest.fixture(autouse=True)
def _skip_without_sandbox(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("bwrap") is None:
        return
    reason = _unavailable(request.node.get_closest_marker("cgroup") is not None)
    if reason:
        pytest.skip(reason)
