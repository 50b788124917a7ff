"""piped_child: a contained child on three pipes, started on a spawner thread within a
timeout, and shut (killed, reaped, our fds closed) however its start ends."""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from supervisor.scripted.piped_child import StartTimeout, shut, start_waiting
from supervisor.scripted.text_tools.jq_tool.spawner import Spawner

#: a child that answers one line on its reply fd (argv[3]) and waits for its stdin to end
ECHO = (
    "import os, sys; fd = int(sys.argv[3]); os.write(fd, b'up ' + sys.argv[4].encode());"
    " sys.stdin.buffer.read()"
)


def _read_reply(fd: int) -> bytes:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            return os.read(fd, 100)
        except BlockingIOError:
            time.sleep(0.01)
    raise AssertionError("no reply")


def test_a_started_child_is_contained_and_shut_leaves_nothing() -> None:
    spawner = Spawner("test-spawner")
    try:
        proc, req_w, rep_r, diag_r = start_waiting(spawner, ECHO, 12345, timeout=20)
        assert _read_reply(rep_r) == b"up 12345"
        child = psutil.Process(proc.pid)
        assert child.environ() == {} and child.cwd() == "/"
        assert os.getsid(proc.pid) == proc.pid  # a session of its own
        assert not os.get_blocking(req_w) and not os.get_blocking(rep_r)
        shut(proc, (req_w, rep_r, diag_r))
        assert proc.returncode is not None
        assert not psutil.pid_exists(proc.pid) or child.status() != psutil.STATUS_ZOMBIE
    finally:
        spawner.stop()


def test_a_start_that_outlasts_its_timeout_is_shut_once_it_comes() -> None:
    spawner = Spawner("test-spawner")
    release = threading.Event()
    try:
        spawner.submit(release.wait)  # the spawner thread is busy
        with pytest.raises(StartTimeout, match=r"did not start within 0\.2 s"):
            start_waiting(spawner, ECHO, 1, timeout=0.2)
        before = {p.pid for p in psutil.Process().children()}
        release.set()  # the late start runs now, and its child is shut at once
        spawner.submit(lambda: None).result(20)  # queued after it: it has run
        assert {p.pid for p in psutil.Process().children()} <= before
    finally:
        release.set()
        spawner.stop()
