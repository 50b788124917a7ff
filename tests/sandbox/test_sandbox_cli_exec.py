"""`sandvisor exec` and `sandvisor doctor` as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SANDVISOR = [sys.executable, "-m", "supervisor"]
pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


def sandvisor(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*SANDVISOR, *args], capture_output=True, timeout=60, input=input, env=env
    )


def test_exec_passes_output_and_status_through() -> None:
    p = sandvisor("exec", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    assert (p.returncode, p.stdout, p.stderr) == (3, b"out\n", b"err\n")


@pytest.mark.parametrize(
    ("args", "status", "reason"),
    [
        (["--timeout", "0.3", "--", "sleep", "10"], 124, "timeout"),
        (["--", "/bin/sh", "-c", "kill -SEGV $$"], 139, "signal"),
        (["--memory", "32M", "--", "python3", "-c", "x = bytearray(100 << 20)"], 137, "memory"),
        (
            ["--pids", "8", "--", "/bin/sh", "-c", "for i in $(seq 20); do sleep 5 & done; wait"],
            None,
            "pids",
        ),
        (["--", "/no/such/program"], 125, "setup"),
    ],
    ids=["timeout", "signal", "memory", "pids", "setup"],
)
def test_exec_exit_statuses_and_report(
    args: list[str], status: int | None, reason: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    extra = ["--timeout", "5"] if reason == "pids" else []
    p = sandvisor("exec", "--report", str(report), *extra, *args)
    record = json.loads(report.read_text())
    if reason == "pids":
        assert "pids" in record["limits_hit"]
    else:
        assert p.returncode == status and record["reason"] == reason
        assert record["exit_status"] == status


def test_exec_caps_output_and_says_so() -> None:
    p = sandvisor("exec", "--stdout-cap", "1K", "--", "/bin/sh", "-c", "yes | head -c 100000")
    assert p.returncode == 0 and p.stdout == b"y\n" * 512
    assert b"stdout truncated at 1024 bytes (98976 dropped)" in p.stderr


def test_exec_env_binds_network_and_stdin(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    (shared / "data.txt").write_text("bound\n")
    p = sandvisor(
        "exec",
        "--env",
        "GREETING=hi",
        "--ro-bind",
        f"{shared}:/srv/in",
        "--stdin",
        "--",
        "/bin/sh",
        "-c",
        'echo "$GREETING"; cat /srv/in/data.txt; cat',
        input=b"piped\n",
    )
    assert p.returncode == 0 and p.stdout == b"hi\nbound\npiped\n"
    p = sandvisor("exec", "--network", "--", "/bin/sh", "-c", "cat /proc/net/dev | wc -l")
    assert int(p.stdout) > 3  # the host's interfaces, not just lo


def test_exec_refuses_bad_input_clearly(tmp_path: Path) -> None:
    p = sandvisor("exec", "--ro-bind", "relative/path", "--", "true")
    assert p.returncode == 125 and b"must be absolute" in p.stderr
    p = sandvisor("exec", "--env", "NOEQUALS", "--", "true")
    assert p.returncode == 125 and b"KEY=VALUE" in p.stderr
    p = sandvisor("exec")
    assert p.returncode == 2 and b"no program" in p.stderr
    p = sandvisor("exec", "--memory", "lots", "--", "true")
    assert p.returncode == 2
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # root's alone: the sandbox could not read it, so say so now
    p = sandvisor("exec", "--ro-bind", str(private), "--", "true")
    assert p.returncode == 125 and b"not readable by the sandbox" in p.stderr


def test_doctor_reports_and_exits_zero_here() -> None:
    p = sandvisor("doctor")
    assert p.returncode == 0, p.stdout
    text = p.stdout.decode()
    for name in ("bubblewrap", "user namespaces", "seccomp", "cgroup memory", "smoke test"):
        assert name in text
    assert "Everything a default sandbox needs is here." in text


def test_doctor_json_names_missing_things_and_their_fix() -> None:
    p = sandvisor("doctor", "--json", "--no-smoke")
    report = json.loads(p.stdout)
    assert report["ok"] is True and p.returncode == 0
    names = {c["name"] for c in report["checks"]}
    assert {"root", "bubblewrap version", "cgroup pids", "mount API and pidfd"} <= names
    # without bwrap the report says what is missing and how to fix it
    env = {**os.environ, "SANDVISOR_BWRAP": "/nonexistent/bwrap"}
    p = sandvisor("doctor", "--json", env=env)
    report = json.loads(p.stdout)
    assert p.returncode == 1
    missing = {c["name"]: c for c in report["checks"] if c["status"] == "missing"}
    assert report["ok"] is False and "bubblewrap" in missing
    assert "apt-get install bubblewrap" in missing["bubblewrap"]["fix"]
