"""The fork server: sandboxes are the spawning thread's children, born in their cgroups;
one small server per thread, reused, stopped with its thread, replaced when it died idle;
nothing of the host reaches a sandbox through it; requests of the wrong shape refused."""

from __future__ import annotations

import marshal
import os
import signal
import threading
import time

import psutil
import pytest

from sandbox import forkserver
from sandbox.cgroups import detect_layout
from sandbox.errors import LaunchError
from sandbox.forkserver_main import PLUGGED, VERSION, Request, RequestError
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import Spawner, retire, spawn

SLEEP = Command(("/bin/sleep", "1000"))


def fields(**changes: object) -> tuple[object, ...]:
    base: dict[str, object] = {
        "version": VERSION,
        "executable": "/usr/bin/bwrap",
        "argv": ("bwrap", "--", "/bin/true"),
        "fd_map": ((0, 0), (1, 1), (2, 1)),
        "joins": (2,),
        "birth": None,
        "rlimits": ((7, 256, 256),),
        "trees": (),
        "uid": 0x70000001,
        "parent": 1,
        "report": 3,
    }
    base.update(changes)
    return tuple(base.values())


FDS = [PLUGGED, PLUGGED + 1, PLUGGED + 2, PLUGGED + 3]


def test_a_well_formed_request_resolves_its_fds() -> None:
    request = Request(fields(birth=(2, 3)), list(FDS))
    assert request.fd_map == ((0, PLUGGED), (1, PLUGGED + 1), (2, PLUGGED + 1))
    assert request.join_fds == (PLUGGED + 2,)
    assert request.birth == (PLUGGED + 2, PLUGGED + 3)
    assert request.report_fd == PLUGGED + 3 and request.argv[0] == "bwrap"


@pytest.mark.parametrize(
    "bad",
    [
        {"version": VERSION + 1},
        {"argv": ()},
        {"argv": ("bwrap", "a\0b")},
        {"argv": ["bwrap"]},  # marshal keeps lists as lists: only tuples are accepted
        {"fd_map": ((0, 9),)},  # no such received fd
        {"fd_map": ((PLUGGED, 0),)},  # a child fd among the received ones
        {"fd_map": ((0, 0, 0),)},
        {"uid": "0"},
        {"uid": True},
        {"rlimits": ((7, 1),)},
        {"report": -1},
        {"birth": (0,)},
    ],
)
def test_a_request_of_the_wrong_shape_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(RequestError):
        Request(fields(**bad), list(FDS))


def test_received_fds_below_the_plugs_are_refused() -> None:
    with pytest.raises(RequestError, match="among the child fd numbers"):
        Request(fields(), [5, *FDS[1:]])
    with pytest.raises(RequestError):
        Request(marshal.loads(marshal.dumps(("not", "a", "request"))), list(FDS))


def cgroup_lines(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return f.read()


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_sandbox_is_the_spawning_process_s_child_born_in_all_its_cgroups() -> None:
    with spawn(prepare_launch(SandboxPolicy(), SLEEP)) as sandbox:
        assert sandbox.cgroup is not None
        assert psutil.Process(sandbox.pid).ppid() == os.getpid()  # not the server's
        lines = cgroup_lines(sandbox.pid)
        hierarchies = detect_layout().hierarchies
        assert lines.count(sandbox.cgroup.name) == len(hierarchies) >= 1
        server = forkserver.of_this_thread().pid
        assert server is not None and sandbox.cgroup.name not in cgroup_lines(server)


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_one_small_server_per_thread_reused_and_gone_with_its_thread() -> None:
    seen: list[int | None] = []

    def thread_body() -> None:
        for _ in range(2):
            assert run(SandboxPolicy(), ["/bin/true"], timeout=10).exit_status == 0
            seen.append(forkserver.of_this_thread().pid)

    thread = threading.Thread(target=thread_body)
    thread.start()
    thread.join()
    assert seen[0] is not None and seen[0] == seen[1]  # one server, kept between sandboxes
    assert seen[0] != forkserver.of_this_thread().pid  # ... and not this thread's
    assert not psutil.pid_exists(seen[0])  # stopped and reaped when its thread ended


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_server_that_died_idle_is_replaced() -> None:
    run(SandboxPolicy(), ["/bin/true"], timeout=10)
    server = forkserver.of_this_thread()
    old = server.pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while psutil.Process(old).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert run(SandboxPolicy(), ["/bin/true"], timeout=10).exit_status == 0
    assert server.pid not in (None, old)
    assert not psutil.pid_exists(old)  # reaped


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_spawner_closes_its_server_and_retire_stops_idle_ones() -> None:
    run(SandboxPolicy(), ["/bin/true"], timeout=10)
    mine = forkserver.of_this_thread().pid
    with Spawner() as spawner:
        with spawner.spawn(prepare_launch(SandboxPolicy(), SLEEP)) as sandbox:
            assert psutil.Process(sandbox.pid).ppid() == os.getpid()
        servers = fork_servers()
        assert mine in servers and len(servers) >= 2  # this thread's and the spawner's
    assert not set(servers) & set(fork_servers())  # both stopped (no sandbox left)
    assert mine is not None and not psutil.pid_exists(mine)  # and reaped
    assert retire()
    assert run(SandboxPolicy(), ["/bin/true"], timeout=10).exit_status == 0  # starts anew


def fork_servers() -> list[int]:
    found = []
    for child in psutil.Process().children():
        try:
            if "sandbox.forkserver_main" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_only_the_owning_thread_may_use_a_server() -> None:
    server = forkserver.of_this_thread()
    errors: list[BaseException] = []

    def other() -> None:
        plan = prepare_launch(SandboxPolicy(), SLEEP)
        try:
            server.spawn(plan)
        except BaseException as exc:
            errors.append(exc)
        finally:
            plan.abort()  # `spawn.start` does this for a plan it could not start

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert isinstance(errors[0], LaunchError) and "thread that created it" in str(errors[0])


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_an_exec_failure_raises_and_leaves_nothing() -> None:
    plan = prepare_launch(SandboxPolicy(), SLEEP)
    paths = plan.cgroup.paths if plan.cgroup else []
    plan.executable = "/nonexistent/bwrap"
    before = {p.pid for p in psutil.Process().children()}
    with pytest.raises(LaunchError, match="cannot start bwrap: FileNotFoundError"):
        spawn(plan)
    assert paths and not any(os.path.exists(p) for p in paths)
    assert {p.pid for p in psutil.Process().children()} <= before  # the child was reaped


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_a_large_command_goes_through() -> None:
    args = ["x" * 100_000] * 6  # 600 kB: more than a socket's default buffer
    result = run(SandboxPolicy(), ["/bin/sh", "-c", 'echo "$#"', "sh", *args], timeout=10)
    assert result.stdout == b"6\n"


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_nothing_of_the_host_reaches_a_sandbox_through_a_fresh_server() -> None:
    """A server started while the host holds inheritable fds, and blocks and ignores
    signals, passes none of it on: the program starts with 0-2 and default signals."""
    forkserver.of_this_thread().stop()
    leak_r, leak_w = os.pipe()
    os.set_inheritable(leak_r, True)
    os.set_inheritable(leak_w, True)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        listing = run(SandboxPolicy(), ["/bin/ls", "/proc/self/fd"], timeout=10)
        status = run(SandboxPolicy(), ["/bin/grep", "^Sig", "/proc/self/status"], timeout=10)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        signal.signal(signal.SIGHUP, old_hup)
        os.close(leak_r)
        os.close(leak_w)
    assert sorted(int(fd) for fd in listing.stdout.split()) == [0, 1, 2, 3]  # 3: ls's own
    masks = dict(line.split(":\t") for line in status.stdout.decode().splitlines())
    assert int(masks["SigIgn"], 16) == 0  # not even glibc's own 32 and 33
    assert int(masks["SigBlk"], 16) == 0
