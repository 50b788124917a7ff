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
    open_fds,
    uid_processes,
    wait_for,
)

from sandbox.cgroups import collect_orphans, detect_layout, host_start_time
from sandbox.launch import prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import Spawner, spawn

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


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
