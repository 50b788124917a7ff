"""`sandvisor doctor -- COMMAND`: whether the runtime an MCP server needs can be bound, one
line per check with its fix, as a user runs it (a real process, real files, the real
servers and a real sandbox for the start check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hosting_helpers import child_env
from mcp_fixtures import Servers

ROOTLESS = os.geteuid() != 0  # the sandbox runs as this user's own uid


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "doctor", *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )


def mcp_checks(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    report = json.loads(done.stdout)
    return [c for c in report["checks"] if c["name"].startswith("mcp ")]


def test_a_runnable_server_passes_every_check_and_starts(servers: Servers) -> None:
    done = doctor("--", *servers.everything)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if " mcp " in line]
    assert [words[:3] for words in lines] == [
        ["ok", "mcp", "server"],  # program
        ["ok", "mcp", "runtime"],  # the package tree with its node_modules
        ["ok", "mcp", "server"],  # start
    ]
    assert "answers initialize and tools/list in a sandbox" in done.stdout


def test_a_server_that_fails_to_start_says_why(servers: Servers) -> None:
    done = doctor("--json", "--", *servers.hostile, "--fail-start")
    assert done.returncode == 1
    start = mcp_checks(done)[-1]
    assert (start["name"], start["status"]) == ("mcp server start", "missing")
    assert "missing configuration file /etc/hostile.toml" in start["detail"]
    assert "mcp --server --check" in start["fix"]


def test_what_the_sandbox_cannot_bind_or_read_is_named_with_its_fix(tmp_path: Path) -> None:
    done = doctor("--json", "--no-smoke", "--", "no-such-mcp-server")
    checks = mcp_checks(done)
    assert done.returncode == 1 and [c["status"] for c in checks] == ["missing"]
    assert "is not an executable file" in checks[0]["detail"] and "install" in checks[0]["fix"]

    done = doctor("--json", "--no-smoke", "--", "npx", "-y", "some-server")
    assert "downloads the server" in mcp_checks(done)[0]["detail"]

    # a runtime's prefix the sandbox's uid cannot read (e.g. installed under a 0700 home,
    # for root's fresh uid; a rootless host's sandbox is its own uid: its owner bits)
    prefix = tmp_path / "runtime"
    (prefix / "bin").mkdir(parents=True)
    program = prefix / "bin" / "server"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    prefix.chmod(0o300 if ROOTLESS else 0o700)
    done = doctor("--json", "--no-smoke", "--", str(program))
    assert mcp_checks(done)[0]["status"] == "ok"  # its #!/bin/sh is the system's: not bound
    runtime = [c for c in mcp_checks(done) if c["name"] == "mcp runtime"]
    assert done.returncode == 1 and runtime[0]["status"] == "missing", done.stdout
    assert "not readable by the sandbox" in runtime[0]["detail"]
    if ROOTLESS:
        assert runtime[0]["fix"] == f"chmod -R u+rX {prefix}"
    else:
        assert runtime[0]["fix"] == (
            f"chmod -R o+rX {prefix}, or install the runtime where others can read"
        )

    # a script the sandbox's uid cannot read, in a directory it can
    app = tmp_path / "app"
    app.mkdir()
    app.chmod(0o755)
    script = app / "server.js"
    script.write_text("")
    script.chmod(0o200 if ROOTLESS else 0o600)
    done = doctor("--json", "--no-smoke", "--", "node", str(script))
    files = [c for c in mcp_checks(done) if c["name"] == "mcp server file"]
    who = "u" if ROOTLESS else "o"
    assert done.returncode == 1 and files[0]["fix"] == f"chmod {who}+r {script}", done.stdout
