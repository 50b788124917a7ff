"""The bridge's own spawn of its server (`mcp_child.spawn_server`: fork and exec by hand,
so that nothing but ``os`` and ``_ctypes`` loads before it): what the server gets, and
what becomes of it, with real processes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker_runtime.bridges.mcp_child import kill_server, spawn_server

REPORT = (
    'echo "sid $(cut -d" " -f6 /proc/self/stat) pid $$"; '
    'echo "oom $(cat /proc/self/oom_score_adj)"; '
    "ls /proc/self/fd"
)
#: The server's own signal state, read by the server itself (a shell would not do: dash
#: clears its mask when it starts, and blocks every signal around each of its forks)
SIGNALS = ["grep", "-E", "^(SigBlk|SigIgn)", "/proc/self/status"]


def read_all(fd: int, timeout: float = 10.0) -> bytes:
    out, until = b"", time.monotonic() + timeout
    while time.monotonic() < until:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        if not chunk:
            return out
        out += chunk
    raise AssertionError(f"no EOF within {timeout} s: {out!r}")


def run_to_end(argv: list[str]) -> list[str]:
    """Spawn with an ignored SIGTERM and a blocked SIGUSR1 and SIGINT in this thread (the
    bridge's kind), read the server's output to its end."""
    ignored = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGINT})
    try:
        server = spawn_server(argv)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGTERM, ignored)
    try:
        lines = read_all(server.stdout).decode().splitlines()
        assert server.wait(10) == 0
    finally:
        kill_server(server)
        for fd in (server.stdin, server.stdout, server.stderr):
            os.close(fd)
    return [f"pid {server.pid}", *lines]


def test_the_server_gets_its_three_pipes_its_own_session_and_default_signals() -> None:
    leaked = os.open("/dev/null", os.O_RDONLY)
    os.set_inheritable(leaked, True)  # as bwrap's fds 3 and 4 are: still not the server's
    try:
        lines = run_to_end(["/bin/sh", "-c", REPORT])
    finally:
        os.close(leaked)
    server_pid = lines.pop(0).split()[1]
    sid, pid = lines[0].split()[1::2]
    assert sid == pid == server_pid  # a session (and process group) of its own
    assert lines[1] == "oom 1000"  # killed first under memory pressure
    # neither the bridge's blocked signals nor its ignored ones are inherited
    assert run_to_end(SIGNALS)[1:] == ["SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000"]
    fds = sorted(int(x) for x in lines[2:])
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds  # (the fourth: ls's own listing)


def test_the_server_dies_with_the_bridge() -> None:
    """Its parent-death signal is SIGKILL, read by the server itself (prctl through
    ``_ctypes``, as the bridge calls it)."""
    read = (
        "import ctypes; v = ctypes.c_int(); "
        "ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"  # GET_PDEATHSIG
    )
    assert run_to_end([sys.executable, "-I", "-c", read])[1:] == [str(int(signal.SIGKILL))]


def test_the_guarded_bridge_is_not_dumpable_and_a_refused_prctl_says_its_errno() -> None:
    check = (
        "from worker_runtime.bridges.mcp_child import _errno, _prctl, guard_self; "
        "print(_prctl(3, 0)); guard_self(); print(_prctl(3, 0)); "  # PR_GET_DUMPABLE
        "print(_prctl(4, 7), _errno())"  # PR_SET_DUMPABLE 7: EINVAL
    )
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-S", "-c", check], env={"PYTHONPATH": root}, capture_output=True
    )
    assert out.stdout.decode().split() == ["1", "0", "-1", str(errno.EINVAL)], out


def test_a_program_that_cannot_run_is_an_oserror_with_its_errno() -> None:
    with pytest.raises(OSError) as caught:
        spawn_server(["/nonexistent/mcp-server"])
    assert caught.value.errno == errno.ENOENT
    assert "exec /nonexistent/mcp-server" in str(caught.value)


def test_kill_server_ends_the_whole_process_group_and_reaps_it() -> None:
    server = spawn_server(["/bin/sh", "-c", "sleep 60 & echo $!; wait"])
    try:
        grandchild = int(read_line(server.stdout))
        assert server.wait(0.05) is None  # running
    finally:
        kill_server(server)
        for fd in (server.stdin, server.stdout, server.stderr):
            os.close(fd)
    assert server.returncode == -signal.SIGKILL
    until = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < until:
        time.sleep(0.01)
    assert not _alive(grandchild)


def read_line(fd: int, timeout: float = 10.0) -> str:
    out, until = b"", time.monotonic() + timeout
    while b"\n" not in out and time.monotonic() < until:
        try:
            out += os.read(fd, 4096)
        except BlockingIOError:
            time.sleep(0.01)
    return out.decode().strip()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
