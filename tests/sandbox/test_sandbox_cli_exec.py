"""`sandvisor exec` as a user runs it (real processes): statuses, caps, binds, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from net_helpers import http_server
from sandbox_helpers import sandvisor

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


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
    private.mkdir(mode=0o000)  # no one's: the sandbox could not read it, so say so now
    p = sandvisor("exec", "--ro-bind", str(private), "--", "true")
    assert p.returncode == 125 and b"not readable by the sandbox" in p.stderr


def test_exec_per_process_limits_are_only_a_fallback(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    p = sandvisor("exec", "--per-process-limits", "--report", str(report), "--", "true")
    # with cgroups here, the option changes nothing: nothing is given up
    assert p.returncode == 0 and json.loads(report.read_text())["weakened"] == []


def test_exec_allow_net_reaches_what_it_allows_and_says_what_it_refused(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code = (
        "import urllib.request as u, urllib.error as e, sys\n"
        "print(len(u.urlopen(sys.argv[1]).read()))\n"
        "try: u.urlopen(sys.argv[2])\n"
        "except e.HTTPError as x: print(x.code)\n"
    )
    with http_server() as port:
        p = sandvisor(
            "exec", "--allow-net", f"web.test:{port}", "--net-host", "web.test=127.0.0.1",
            "--report", str(report), "--",
            "python3", "-c", code, f"http://web.test:{port}/1234", f"http://denied.test:{port}/",
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [b"1234", b"403"]
    assert p.stderr.decode().splitlines() == [
        f"sandvisor exec: network: refused denied.test:{port} (not_allowed): "
        f"denied.test:{port} is not in the allowlist (web.test:{port})"
    ]
    events = json.loads(report.read_text())["network"]
    assert sorted((e["host"], e["allowed"]) for e in events) == [
        ("denied.test", False),
        ("web.test", True),
    ]


def test_exec_allow_net_usage() -> None:
    both = sandvisor("exec", "--network", "--allow-net", "a.test", "--", "/bin/true")
    assert both.returncode == 2 and b"not allowed with argument" in both.stderr
    alone = sandvisor("exec", "--net-host", "a.test=10.0.0.1", "--", "/bin/true")
    assert alone.returncode == 125 and b"need --allow-net" in alone.stderr
    bad = sandvisor("exec", "--allow-net", "a b", "--", "/bin/true")
    assert bad.returncode == 125
    assert bad.stderr.strip().count(b"\n") == 0 and b"'a b'" in bad.stderr
