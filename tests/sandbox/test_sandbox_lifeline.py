"""The lifeline and the collection of leftovers: A25 the host itself dying (steady, and
during bwrap's start-up), cgroups of dead hosts, nothing left open once the last sandbox
is gone."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from sandbox_helpers import (
    PYTHON,
    TREE,
    alive,
    namespace_processes,
    open_fds,
    pin_namespace,
    tagged_processes,
    uid_processes,
    wait_for,
)

from sandbox.cgroups import collect_orphans, detect_layout, host_start_time
from sandbox.launch import prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import Spawner, spawn

pytestmark = [pytest.mark.bwrap]

CGROUPS = [pytest.param("cgroup", marks=pytest.mark.cgroup), "none"]


class Host:
    """A real host process (`sandbox_host_child`), what it reported, and what the test
    holds to watch its sandboxes independently of sandvisor: their pid namespaces, pinned
    by fds of the test's own while the host runs (so their inodes cannot be reused)."""

    def __init__(self, mode: str, cgroups: str) -> None:
        child = Path(__file__).with_name("sandbox_host_child.py")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        argv = [PYTHON, str(child), mode, cgroups]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
        assert self.process.stdout is not None
        self.report: list[dict[str, Any]] = json.loads(self.process.stdout.readline())
        self.namespaces = [pin_namespace(e["pidns"]) for e in self.report if e["pidns"]]

    def sandbox_processes(self) -> list[psutil.Process]:
        found = [p for e in self.report if e["fresh"] for p in uid_processes(e["uid"])]
        found += [p for fd in self.namespaces if fd is not None for p in namespace_processes(fd)]
        found += [p for e in self.report for p in tagged_processes(e["argv0"])]
        return found

    def all_gone(self) -> bool:
        report = self.report
        cgroups = [path for e in report for path in e["cgroups"] if os.path.exists(path)]
        servers = [pid for e in report for pid in e["servers"] if alive(pid)]
        return not self.sandbox_processes() and not cgroups and not servers

    def describe(self) -> list[str]:
        """What is left, for a failure's message."""
        left = []
        for p in self.sandbox_processes():
            with contextlib.suppress(psutil.Error):
                left.append(f"{p.pid} ppid={p.ppid()} {p.status()} {p.cmdline()[:3]}")
        left += [path for e in self.report for path in e["cgroups"] if os.path.exists(path)]
        return left

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for fd in self.namespaces:
            if fd is not None:
                os.close(fd)


@pytest.mark.parametrize("cgroups", CGROUPS)
def test_a25_host_sigkill_takes_every_sandbox_with_it(cgroups: str) -> None:
    host = Host("steady", cgroups)
    try:
        assert len(host.report) == 3
        assert len(host.report[0]["servers"]) == 2  # the main thread's and the spawner's
        assert wait_for(lambda: len(host.sandbox_processes()) >= 15)  # 3 x (init, sh, 3 sleep)
        host.process.kill()
        # no process, and no cgroup: the host's lifeline removed what the host could not
        assert wait_for(host.all_gone, timeout=15)
    finally:
        host.close()


@pytest.mark.parametrize("cgroups", CGROUPS)
def test_a25_host_death_during_bwrap_start_up_leaves_nothing(cgroups: str) -> None:
    """bwrap 0.8.0 arms die-with-parent in the sandbox only at the end of its set-up; a
    host that dies before then must still take the sandbox with it (the lifeline: by the
    cgroups, or, without any, by the tag in bwrap's argv[0], which its child keeps)."""
    for _ in range(5):
        host = Host("startup", cgroups)
        try:
            host.process.wait(30)
            assert wait_for(host.all_gone, timeout=15), (host.report, host.describe())
        finally:
            host.close()


@pytest.mark.cgroup
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


@pytest.mark.cgroup
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


@pytest.mark.cgroup
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
