"""A real host process for the host-death tests: it starts sandboxes, says which, and waits.

``steady``: two sandboxes from a `Spawner` thread and one from the main thread, then it
sleeps until the test SIGKILLs it. ``startup``: it forks bwrap for one sandbox and SIGKILLs
itself at once, while bwrap is still setting up (bwrap 0.8.0's die-with-parent race).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import Spawner, spawn

COMMAND = Command(("/bin/sh", "-c", "sleep 1000 & sleep 1000 & sleep 1000"))


def report(entries: list[tuple[int, list[str]]]) -> None:
    """Each sandbox's uid and cgroups, and the host's fork servers (children of ours)."""
    servers = [int(pid) for pid in _children() if b"forkserver_main" in _cmdline(pid)]
    print(
        json.dumps([{"uid": uid, "cgroups": paths, "servers": servers} for uid, paths in entries]),
        flush=True,
    )


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


def steady() -> None:
    policy = SandboxPolicy()
    spawner = Spawner().start()
    sandboxes = [spawner.spawn(prepare_launch(policy, COMMAND)) for _ in range(2)]
    sandboxes.append(spawn(prepare_launch(policy, COMMAND)))
    report([(s.uid, s.cgroup.paths if s.cgroup else []) for s in sandboxes])
    time.sleep(1000)


def startup() -> None:
    plan = prepare_launch(SandboxPolicy(), COMMAND)
    report([(plan.uid, plan.cgroup.paths if plan.cgroup else [])])
    subprocess.Popen(plan.argv, **plan.popen_kwargs())
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    {"steady": steady, "startup": startup}[sys.argv[1]]()
