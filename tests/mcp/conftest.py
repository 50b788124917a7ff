"""Set-up for the MCP server tests: real servers at pinned versions, in real sandboxes.

``scripts/mcp-test-servers`` installs them once into ``.cache/mcp-servers/`` (npm's
``server-everything`` and ``server-filesystem``, PyPI's ``mcp-server-time`` and the SDK
the hostile server in ``servers/`` runs on); the first test to need them runs it under a
file lock, so the two xdist workers never install twice. Where npm is missing the tests
skip, saying how to get it (a failure under ``SANDVISOR_REQUIRE_SANDBOX=1``, as in CI).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp_fixtures import Servers
from sandbox_gate import mark_sandboxed, skip_without_sandbox

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = ROOT / ".cache" / "mcp-servers"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_sandboxed(items, HERE)


@pytest.fixture(autouse=True)
def _needs_sandbox(request: pytest.FixtureRequest) -> None:
    skip_without_sandbox(request)


@pytest.fixture(scope="session")
def servers() -> Servers:
    if shutil.which("npm") is None:
        message = "needs node and npm for the real MCP servers: apt-get install -y nodejs npm"
        if os.environ.get("SANDVISOR_REQUIRE_SANDBOX") == "1":
            pytest.fail(message)
        pytest.skip(message)
    CACHE.parent.mkdir(exist_ok=True)
    with open(CACHE.parent / "mcp-servers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [str(ROOT / "scripts" / "mcp-test-servers")], capture_output=True, text=True
        )
    if done.returncode != 0:
        pytest.fail(f"installing the test MCP servers failed: {done.stderr.strip()[-2000:]}")
    npm = CACHE / "npm" / "node_modules" / "@modelcontextprotocol"
    python = str(CACHE / "py" / "bin" / "python")
    return Servers(
        everything=["node", str(npm / "server-everything" / "dist" / "index.js")],
        filesystem=["node", str(npm / "server-filesystem" / "dist" / "index.js")],
        time=[python, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        hostile=[python, str(HERE / "servers" / "hostile_server.py")],
    )
