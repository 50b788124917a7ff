"""Teardown and lifetime: kill, classify, survivors, cleanup; A21 daemonised children,
A22 cancel defiance, A25 the host thread or the host itself dying; per-sandbox cgroups;
launch failures that leave nothing behind; spawning from trio."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from sandbox_helpers import PYTHON, py_policy, read_line, run_py, start_py

from sandbox.cgroups import collect_orphans, detect_layout, host_start_time
from sandbox.errors import LaunchError
from sandbox.handle import Sandbox
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import Spawner, spawn

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]

TREE = Command(("/bin/sh", "-c", "for i in 1 2 3 4; do sleep 1000 & done; wait"))


def uid_processes(uid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info["uids"]
        alive = proc.info["status"] != psutil.STATUS_ZOMBIE
        if uids and uid in (uids.real, uids.effective) and alive:
            found.append(proc)
    return found


def wait_for(predicate: object, timeout: float = 10.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def started(sandbox: Sandbox, count: int) -> bool:
    assert sandbox.cgroup is not None
    return wait_for(lambda: len(sandbox.cgroup.pids()) >= count)


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def test_kill_is_idempotent_and_the_first_reason_counts() -> None:
    run(SandboxPolicy(), ["true"], timeout=10)  # the process's lifeline fd is open from now on
    fds_before = open_fds()
    plan = prepare_launch(SandboxPolicy(), TREE)
    sandbox = spawn(plan)
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
    # not even a zombie: bwrap reaped the namespace's init before it exited itself
    assert [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real == sandbox.uid] == []
    assert paths and not any(os.path.exists(p) for p in paths)
    assert open_fds() == fds_before  # pidfd, status pipe, cgroup fds, stdio: all closed


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


def test_a21_daemonised_children_die_with_the_program() -> None:
    with start_py(DAEMONS) as sandbox:
        assert read_line(sandbox) == "bye"
        assert sandbox.wait(10) == 0
        # the program is gone, so its pid namespace is gone, and everything in it
        assert wait_for(lambda: uid_processes(sandbox.uid) == [])
        assert sandbox.survivors() == []


def test_a21_a_background_process_holding_stdout_does_not_hang_run() -> None:
    started_at = time.monotonic()
    result = run_py(DAEMONS, timeout=30)
    assert result.reason == "exited" and result.stdout == b"bye\n"
    assert time.monotonic() - started_at < 10


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


def test_teardown_of_a_fifty_process_sandbox_leaves_nothing() -> None:
    code = """
for _ in range(49):
    if os.fork() == 0:
        signal.pause()
print("ready", flush=True)
signal.pause()
"""
    with start_py(code, policy=py_policy(pids=128)) as sandbox:
        assert read_line(sandbox) == "ready"
        assert started(sandbox, 52)  # 50 plus bwrap and its init
        uid = sandbox.uid
        sandbox.kill("teardown")
        sandbox.wait(10)
    assert sandbox.survivors() == [] and uid_processes(uid) == []


def test_each_sandbox_has_its_own_cgroups_and_uid_and_the_parent_no_limits() -> None:
    with (
        start_py("print('a', flush=True)\nsignal.pause()\n") as a,
        start_py("print('b', flush=True)\nsignal.pause()\n") as b,
    ):
        assert read_line(a) == "a" and read_line(b) == "b"
        assert a.cgroup is not None and b.cgroup is not None
        assert a.uid != b.uid
        assert not set(a.cgroup.paths) & set(b.cgroup.paths)
        assert not a.cgroup.pids() & b.cgroup.pids()
        memory = Path(a.cgroup.dirs["memory"])
        assert int((memory / "memory.limit_in_bytes").read_text()) == 512 << 20
        parent = int((memory.parent / "memory.limit_in_bytes").read_text())
        assert parent > 1 << 60  # the shared parent holds no limit
        pids = Path(a.cgroup.dirs["pids"])
        assert (pids / "pids.max").read_text().strip() == "128"
        assert (pids.parent / "pids.max").read_text().strip() == "max"


def test_a25_sandbox_dies_when_its_spawning_thread_exits() -> None:
    box: list[Sandbox] = []

    def spawner_thread() -> None:
        box.append(spawn(prepare_launch(SandboxPolicy(), TREE)))

    thread = threading.Thread(target=spawner_thread)
    thread.start()
    thread.join()
    sandbox = box[0]
    with sandbox:
        # killed by PR_SET_PDEATHSIG (-9), or by the thread-exit backstop through its init
        # first (bwrap then reports its init's death: 137)
        assert sandbox.wait(10) in (-signal.SIGKILL, 128 + signal.SIGKILL)
        assert sandbox.termination().signal == signal.SIGKILL
        assert wait_for(lambda: sandbox.survivors() == [])


def test_a25_a_spawner_thread_keeps_sandboxes_alive_until_it_closes() -> None:
    spawner = Spawner().start()
    box: list[Sandbox] = []
    thread = threading.Thread(
        target=lambda: box.append(spawner.spawn(prepare_launch(SandboxPolicy(), TREE)))
    )
    thread.start()
    thread.join()  # the requesting thread is gone; the sandbox lives on
    sandbox = box[0]
    with sandbox:
        assert started(sandbox, 6)
        assert sandbox.wait(0.3) is None
        spawner.close()  # ... until the spawner's own thread ends
        assert sandbox.wait(10) in (-signal.SIGKILL, 128 + signal.SIGKILL)


def run_host(mode: str) -> list[dict[str, Any]]:
    """Start a real host process, let it start sandboxes, SIGKILL it; what it reported."""
    child = Path(__file__).with_name("sandbox_host_child.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    host = subprocess.Popen([PYTHON, str(child), mode], stdout=subprocess.PIPE, env=env)
    try:
        assert host.stdout is not None
        report: list[dict[str, Any]] = json.loads(host.stdout.readline())
        if mode == "steady":
            assert wait_for(lambda: all(len(uid_processes(e["uid"])) >= 5 for e in report))
            host.kill()
        host.wait(30)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    return report


def all_gone(report: list[dict[str, Any]]) -> bool:
    processes = [p for e in report for p in uid_processes(e["uid"])]
    cgroups = [path for e in report for path in e["cgroups"] if os.path.exists(path)]
    servers = [pid for e in report for pid in e.get("servers", []) if alive(pid)]
    return not processes and not cgroups and not servers


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def test_a25_host_sigkill_takes_every_sandbox_with_it() -> None:
    report = run_host("steady")
    assert len(report) == 3
    assert len(report[0]["servers"]) == 2  # the main thread's and the spawner's
    # no process, and no cgroup: the host's lifeline removed what the host could not
    assert wait_for(lambda: all_gone(report), timeout=15)


def test_a25_host_death_during_bwrap_start_up_leaves_nothing() -> None:
    """bwrap 0.8.0 arms die-with-parent in the sandbox only at the end of its set-up; a
    host that dies before then must still take the sandbox with it (the lifeline)."""
    for _ in range(5):
        report = run_host("startup")
        assert wait_for(lambda report=report: all_gone(report), timeout=15), report


def test_cgroups_of_dead_hosts_are_collected() -> None:
    layout = detect_layout()
    stale = [
        os.path.join(h.parent, f"sv-999999999-1-1-1879048193-{os.getpid():x}")
        for h in layout.hierarchies
    ]
    try:
        for path in stale:
            os.mkdir(path)
        collect_orphans(layout, again=True)
        assert not any(os.path.exists(path) for path in stale)
    finally:
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)


def test_cgroups_of_a_zombie_host_are_collected() -> None:
    """A host that died but was never reaped (its parent gone first, under a pid 1 that
    does not reap: a Ray worker whose raylet died) keeps its /proc entry and start time;
    it cleans nothing up any more, so its cgroups are collected all the same."""
    host = subprocess.Popen(["/bin/true"])
    layout = detect_layout()
    stale = [
        os.path.join(h.parent, f"sv-{host.pid}-{host_start_time(host.pid)}-1-1879048193-ab")
        for h in layout.hierarchies
    ]
    try:
        assert wait_for(lambda: psutil.Process(host.pid).status() == psutil.STATUS_ZOMBIE)
        for path in stale:
            os.mkdir(path)
        collect_orphans(layout, again=True)
        assert not any(os.path.exists(path) for path in stale)
    finally:
        host.wait()
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)


def test_a_failing_child_setup_raises_and_leaves_nothing() -> None:
    with open("/proc/sys/fs/nr_open") as f:
        beyond = int(f.read()) + 1  # more open files than the kernel allows even root
    plan = prepare_launch(SandboxPolicy(open_files=beyond), Command(("true",)))
    paths = plan.cgroup.paths if plan.cgroup else []
    with pytest.raises(LaunchError, match="set-up failed"):
        spawn(plan)
    assert paths and not any(os.path.exists(p) for p in paths)
    with pytest.raises(LaunchError, match="already"):
        spawn(plan)  # single use


def test_a_program_that_cannot_be_executed_is_a_setup_failure() -> None:
    result = run(SandboxPolicy(), ["/no/such/program"], timeout=10)
    assert result.reason == "setup" and result.exit_status == 125
    assert b"execvp" in result.stderr


async def test_trio_spawn_and_wait_without_blocking_the_loop() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0.01)

    with Spawner() as spawner:
        plan = prepare_launch(SandboxPolicy(), Command(("/bin/sh", "-c", "sleep 0.3; exit 5")))
        sandbox = await spawner.spawn_async(plan)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            try:
                assert await sandbox.wait_async() == 5
            finally:
                nursery.cancel_scope.cancel()
                sandbox.cleanup()
    assert ticks >= 10
    assert sandbox.termination().exit_code == 5


def test_an_asyncio_spawn_whose_caller_is_cancelled_leaves_no_sandbox() -> None:
    """asyncio can cancel any await: the spawn runs on to its end, then its sandbox is
    taken down before the cancellation goes on (never orphaned, cgroups removed)."""
    from sandbox import lifeline

    spawned: list[Sandbox] = []
    original = Spawner.spawn

    def spawn_and_note(self: Spawner, *args: Any, **kwargs: Any) -> Sandbox:
        sandbox = original(self, *args, **kwargs)
        spawned.append(sandbox)
        return sandbox

    async def main() -> None:
        with Spawner() as spawner:
            plan = prepare_launch(SandboxPolicy(), Command(("sleep", "1000")))
            task = asyncio.create_task(spawner.spawn_async(plan))
            await asyncio.sleep(0)  # the spawn has begun in a thread
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    Spawner.spawn = spawn_and_note  # type: ignore[method-assign]
    try:
        asyncio.run(main())
    finally:
        Spawner.spawn = original  # type: ignore[method-assign]
    assert len(spawned) == 1  # it did start, for a caller that was gone
    assert not spawned[0].survivors() and spawned[0].poll() is not None
    assert lifeline.users() == 0  # its cgroups are removed


@pytest.mark.slow
async def test_trio_thread_cache_trap_and_the_spawner_that_avoids_it() -> None:
    """trio forks from cached threads that exit after 10 s idle; PDEATHSIG follows the
    thread, so such a sandbox dies. One from a `Spawner` lives on."""
    command = Command(("sleep", "1000"))
    with Spawner() as spawner:
        good = await spawner.spawn_async(prepare_launch(SandboxPolicy(), command))
        plan = prepare_launch(SandboxPolicy(), command)
        kwargs = plan.popen_kwargs()
        proc = await trio.lowlevel.open_process(plan.argv, **kwargs)
        plan.started()
        bad = Sandbox(plan, proc._proc)  # the handle works on any Popen of the plan
        with trio.move_on_after(15):
            await bad.wait_async()
        try:
            assert bad.returncode == -signal.SIGKILL  # killed when the cache thread exited
            assert good.poll() is None  # still running
        finally:
            good.cleanup()
            bad.cleanup()


def test_sandboxes_of_other_threads_survive_a_spawn_on_this_one() -> None:
    """A fork finalises the other threads' records in the child; they must not act there."""
    with Spawner() as spawner:
        other = spawner.spawn(prepare_launch(SandboxPolicy(), TREE))
        mine = spawn(prepare_launch(SandboxPolicy(), TREE))
        with other, mine:
            assert started(other, 6) and started(mine, 6)
            assert other.poll() is None and mine.poll() is None
            assert other.kill_reason is None


def test_nothing_of_sandvisor_stays_open_once_the_last_sandbox_is_gone() -> None:
    from sandbox import lifeline

    lifeline.retire()
    fds_before = open_fds()
    with Spawner() as spawner:
        a = spawner.spawn(prepare_launch(SandboxPolicy(), TREE))
        b = spawn(prepare_launch(SandboxPolicy(), TREE))
        # two sandboxes rely on it (and warm cgroups the spawner may have made meanwhile)
        assert lifeline._current.users >= 2 and lifeline._current.pid is not None
        watcher = lifeline._current.pid
        a.cleanup()
        b.cleanup()
        assert lifeline._current.pid == watcher  # it stays for the next sandbox
    # the closed spawner retired it: told to go ("q"), it touched nothing and exited
    assert lifeline._current.users == 0 and lifeline._current.write_end is None
    assert open_fds() <= fds_before
    # it exited: a zombie until the next retire reaps it, or reaped by this one already
    # (told to go, it may exit before the retiring host looks)
    assert wait_for(lambda: not alive(watcher))
    assert lifeline.retire()
    assert not psutil.pid_exists(watcher)
