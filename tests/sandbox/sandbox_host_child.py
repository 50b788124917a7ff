"""A real host process for the host-death tests: it starts sandboxes, says which, and waits.

``steady``: two sandboxes from a `Spawner` thread and one from the main thread, then it
sleeps until the test SIGKILLs it. ``startup``: it forks bwrap for one sandbox and SIGKILLs
itself at once, while bwrap is still setting up (bwrap 0.8.0's die-with-parent race).
A second argument ``none`` launches without any cgroup (per-process limits), as an
ordinary user without a delegated cgroup does.

It prints one JSON line, a list with an entry per sandbox: its ``uid`` (and whether it is
``fresh``, the sandbox's alone), its ``cgroups``, bwrap's ``argv0`` (the host's tag, for
a sandbox without a cgroup), its pid namespace's inode ``pidns`` where bwrap said it
already, and the host's fork servers (``servers``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from sandbox.cgroups import CgroupLayout
from sandbox.handle import Sandbox
from sandbox.launch import Command, LaunchPlan, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import Spawner, spawn

COMMAND = Command(("/bin/sh", "-c", "sleep 1000 & sleep 1000 & sleep 1000"))


def entry(plan: LaunchPlan, sandbox: Sandbox | None = None) -> dict[str, Any]:
    pidns = None
    if sandbox is not None:
        deadline = time.monotonic() + 10
        while sandbox.status.child_pid is None and time.monotonic() < deadline:
            time.sleep(0.001)
        pidns = sandbox.status.pid_namespace
    return {
        "uid": plan.uid,
        "fresh": plan.uid_kind == "fresh",
        "cgroups": plan.cgroup.paths if plan.cgroup else [],
        "argv0": plan.argv[0],
        "pidns": pidns,
    }


def report(entries: list[dict[str, Any]]) -> None:
    servers = [int(pid) for pid in _children() if b"forkserver_main" in _cmdline(pid)]
    print(json.dumps([{**e, "servers": servers} for e in entries]), flush=True)


def _children() -> list[str]:
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            found += f.read().split()
    return found


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def launch(cgroups: bool) -> LaunchPlan:
    if cgroups:
        return prepare_launch(SandboxPolicy(), COMMAND)
    policy = SandboxPolicy(limits="per-process")
    return prepare_launch(policy, COMMAND, layout=CgroupLayout(()))


def steady(cgroups: bool) -> None:
    spawner = Spawner().start()
    plans = [launch(cgroups) for _ in range(3)]
    sandboxes = [spawner.spawn(plans[0]), spawner.spawn(plans[1]), spawn(plans[2])]
    report([entry(plan, s) for plan, s in zip(plans, sandboxes, strict=True)])
    time.sleep(1000)


def startup(cgroups: bool) -> None:
    plan = launch(cgroups)
    report([entry(plan)])
    subprocess.Popen(plan.argv, **plan.popen_kwargs())
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    mode = {"steady": steady, "startup": startup}[sys.argv[1]]
    mode(cgroups=sys.argv[2:] != ["none"])
