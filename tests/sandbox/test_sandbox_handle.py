"""`Sandbox`: kill, classify, survivors, cleanup; A21 daemonised children, A22 cancel
defiance; each sandbox's own cgroups."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from sandbox_helpers import (
    PRELUDE,
    PYTHON,
    ROOTLESS,
    TREE,
    Watch,
    alive,
    open_fds,
    py_policy,
    read_line,
    run_py,
    start_py,
    started,
    uid_processes,
    wait_for,
)

from sandbox.cgroups import CgroupLayout
from sandbox.errors import ContainmentError
from sandbox.handle import Sandbox
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import spawn

pytestmark = [pytest.mark.bwrap]


@pytest.mark.cgroup
def test_kill_is_idempotent_and_the_first_reason_counts() -> None:
    run(SandboxPolicy(), ["true"], timeout=10)  # the process's lifeline fd is open from now on
    fds_before = open_fds()
    plan = prepare_launch(SandboxPolicy(), TREE)
    sandbox = spawn(plan)
    watch = Watch(sandbox)
    assert started(sandbox, 6)
    paths = sandbox.cgroup.paths if sandbox.cgroup else []
    sandbox.kill("cancelled")
    sandbox.kill("timeout")
    assert sandbox.wait(10) is not None
    sandbox.kill("again")  # after the end: still fine
    assert sandbox.termination().reason == "killed"
    assert "cancelled" in sandbox.termination().detail
    sandbox.cleanup()
    sandbox.cleanup()  # idempotent
    assert sandbox.survivors() == []
    assert watch.processes() == []  # cleanup returned once the namespace's init exited
    assert not any(p.pid == sandbox.pid for p in psutil.process_iter())
    watch.close()
    assert paths and not any(os.path.exists(p) for p in paths)
    assert open_fds() == fds_before  # pidfd, status pipe, cgroup fds, stdio: all closed


@pytest.mark.cgroup
def test_kill_reason_timeout_classifies_as_timeout() -> None:
    with spawn(prepare_launch(SandboxPolicy(), TREE)) as sandbox:
        sandbox.kill("timeout")
        assert sandbox.termination().reason == "timeout"
        assert sandbox.termination().exit_status == 124


DAEMONS = """
import subprocess, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(1000)
    os._exit(0)
subprocess.Popen(["nohup", "sleep", "1000"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["sleep", "1000"])  # keeps stdout open
print("bye", flush=True)
"""


@pytest.mark.cgroup
def test_a21_daemonised_children_die_with_the_program() -> None:
    with start_py(DAEMONS) as sandbox, Watch(sandbox) as watch:
        assert read_line(sandbox) == "bye"
        assert sandbox.wait(10) == 0
        # the program is gone, so its pid namespace is gone, and everything in it
        assert wait_for(lambda: watch.processes() == [])
        assert sandbox.survivors() == []


@pytest.mark.cgroup
def test_a21_a_background_process_holding_stdout_does_not_hang_run() -> None:
    started_at = time.monotonic()
    result = run_py(DAEMONS, timeout=30)
    assert result.reason == "exited" and result.stdout == b"bye\n"
    assert time.monotonic() - started_at < 10


@pytest.mark.cgroup
def test_a22_cancel_defiance_is_killed_and_reported() -> None:
    code = """
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, range(1, 65))
print("ready", flush=True)
while True:
    pass
"""
    with start_py(code) as sandbox:
        assert read_line(sandbox) == "ready"
        sandbox.kill("cancelled")
        termination = sandbox.termination()
    assert termination.reason == "killed" and termination.signal == signal.SIGKILL
    assert sandbox.survivors() == []


@pytest.mark.cgroup
def test_teardown_of_a_fifty_process_sandbox_leaves_nothing() -> None:
    code = """
for _ in range(49):
    if os.fork() == 0:
        signal.pause()
print("ready", flush=True)
signal.pause()
"""
    with start_py(code, policy=py_policy(pids=128)) as sandbox, Watch(sandbox) as watch:
        assert read_line(sandbox) == "ready"
        assert started(sandbox, 52)  # 50 plus bwrap and its init
        sandbox.kill("teardown")
        sandbox.wait(10)
        sandbox.cleanup()  # the teardown: bwrap reaped, the namespace's init gone too
        assert sandbox.survivors() == [] and watch.processes() == []


PTRACE_SEIZE = 0x4206
WALL = 0x40000000  # waitpid's __WALL: a tracee that is not our child


def _hold_namespace_end(sandbox: Sandbox) -> int:
    """Trace one process of ``sandbox`` (not bwrap, not its init) and return its pid:
    once killed, its zombie waits for our ``waitpid``, and the namespace's init (out of
    its cgroup already) waits in the kernel for that zombie's end."""
    init = sandbox.status.child_pid
    assert sandbox.cgroup is not None and init is not None
    held = max(sandbox.cgroup.pids() - {sandbox.pid, init})
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(PTRACE_SEIZE, held, None, None) != 0:
        pytest.skip(f"ptrace refused here: {os.strerror(ctypes.get_errno())}")
    return held


@pytest.mark.cgroup
def test_cleanup_returns_once_the_pid_namespace_has_ended() -> None:
    with spawn(prepare_launch(SandboxPolicy(), TREE)) as sandbox, Watch(sandbox) as watch:
        assert started(sandbox, 6)
        held = _hold_namespace_end(sandbox)
        reaper = threading.Timer(0.5, os.waitpid, (held, WALL))
        reaper.start()
        try:
            sandbox.cleanup()  # the cgroup empties at once; the init ends after the reap
            assert sandbox.survivors() == [] and watch.processes() == []
        finally:
            reaper.join()


@pytest.mark.cgroup
def test_cleanup_fails_closed_while_the_pid_namespace_cannot_end() -> None:
    with spawn(prepare_launch(SandboxPolicy(), TREE)) as sandbox, Watch(sandbox) as watch:
        assert started(sandbox, 6)
        held = _hold_namespace_end(sandbox)
        try:
            with pytest.raises(ContainmentError, match=r"init .* is still exiting after 0.3 s"):
                sandbox.cleanup(timeout=0.3)
        finally:
            os.waitpid(held, WALL)
        sandbox.cleanup()
        assert sandbox.survivors() == [] and watch.processes() == []


@pytest.mark.cgroup
def test_each_sandbox_has_its_own_cgroups_and_uid_and_the_parent_no_limits() -> None:
    with (
        start_py("print('a', flush=True)\nsignal.pause()\n") as a,
        start_py("print('b', flush=True)\nsignal.pause()\n") as b,
    ):
        assert read_line(a) == "a" and read_line(b) == "b"
        assert a.cgroup is not None and b.cgroup is not None
        assert a.uid != b.uid or a.uid_kind == b.uid_kind == "host"  # rootless: the host's
        assert not set(a.cgroup.paths) & set(b.cgroup.paths)
        assert not a.cgroup.pids() & b.cgroup.pids()
        memory = Path(a.cgroup.dirs["memory"])
        assert int((memory / "memory.limit_in_bytes").read_text()) == 512 << 20
        parent = int((memory.parent / "memory.limit_in_bytes").read_text())
        assert parent > 1 << 60  # the shared parent holds no limit
        pids = Path(a.cgroup.dirs["pids"])
        assert (pids / "pids.max").read_text().strip() == "128"
        assert (pids.parent / "pids.max").read_text().strip() == "max"


NO_CGROUPS = CgroupLayout(())


def test_without_a_cgroup_kill_and_cleanup_leave_nothing() -> None:
    policy = py_policy(limits="per-process")
    code = DAEMONS.replace('print("bye", flush=True)', 'print("ready", flush=True)\nsignal.pause()')
    plan = prepare_launch(policy, Command((PYTHON, "-S", "-c", PRELUDE + code)), layout=NO_CGROUPS)
    with spawn(plan, stdout=subprocess.PIPE) as sandbox, Watch(sandbox) as watch:
        assert sandbox.cgroup is None and read_line(sandbox) == "ready"
        assert wait_for(lambda: len(watch.processes()) >= 5)  # init, and 4 of its own
        sandbox.kill("cancelled")
        assert sandbox.termination().reason == "killed"
        sandbox.cleanup()
        assert sandbox.survivors() == [] and watch.processes() == []


def test_without_a_cgroup_or_a_uid_of_its_own_survivors_are_found_by_pid_namespace() -> None:
    """A uid shared with other sandboxes (or, rootless, with the host) says nothing about
    whose a process is; the pid namespace does."""
    shared = None if ROOTLESS else 0x70FFFF01  # rootless: the host's uid, shared anyway
    policy = py_policy(limits="per-process", sandbox_uid=shared)
    plan = prepare_launch(policy, Command(TREE.argv), layout=NO_CGROUPS)
    with spawn(plan) as sandbox, spawn(prepare_launch(policy, TREE, layout=NO_CGROUPS)) as other:
        assert wait_for(lambda: len(sandbox.survivors()) >= 7)  # bwrap, init, sh, 4 sleep
        mine = {p.pid for p in sandbox.survivors(thorough=True)}
        theirs = {p.pid for p in other.survivors(thorough=True)}
        assert len(mine) >= 7 and not mine & theirs  # the same uid, told apart
        assert sandbox.pid not in theirs and other.pid not in mine
        sandbox.kill("cancelled")
        sandbox.wait(10)
        # the namespace's init may outlive bwrap by a moment (a loaded run listed it still
        # running): what is gone stays gone, a survivor would stay
        assert wait_for(lambda: sandbox.survivors(thorough=True) == [])
        assert other.poll() is None  # a sibling of the same uid is untouched


def test_a_kill_before_bwrap_names_its_child_finds_the_child_anyway() -> None:
    """bwrap says which child is the namespace's init only after cloning it (the child
    waits for that word). A kill in between, without a cgroup to sweep, stops bwrap and
    takes its child from /proc: here a stand-in bwrap that never says a word."""
    tools = tempfile.mkdtemp(prefix="sandvisor-fake-bwrap-")
    try:
        os.chmod(tools, 0o755)
        fake = Path(tools, "bwrap")
        fake.write_text("#!/bin/sh\nsleep 1000 &\necho cloned >&2\nexec sleep 1000\n")
        fake.chmod(0o755)
        policy = SandboxPolicy(limits="per-process")  # no pinned bind: /tmp stays the host's
        plan = prepare_launch(policy, TREE, layout=NO_CGROUPS)
        plan.executable = str(fake)
        with spawn(plan, stderr=subprocess.PIPE) as sandbox:
            assert sandbox.popen.stderr is not None
            assert sandbox.popen.stderr.readline() == b"cloned\n"
            children = [c.pid for c in psutil.Process(sandbox.pid).children()]
            assert len(children) == 1 and sandbox.status.child_pid is None
            sandbox.kill("cancelled")
            assert wait_for(lambda: not alive(children[0]))
        assert sandbox.survivors() == []
        assert sandbox.uid_kind != "fresh" or uid_processes(sandbox.uid) == []
    finally:
        shutil.rmtree(tools)
