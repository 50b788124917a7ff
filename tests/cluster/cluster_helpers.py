"""Shared helpers of the cluster tests (a module of its own name: test directories share
one import namespace)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from sandbox.cgroups import detect_layout, host_start_time

ROOT = Path(__file__).resolve().parents[2]
#: ``pytestmark`` of a module that starts a Ray: one xdist worker runs them all (conftest)
RAY_GROUP = pytest.mark.xdist_group("ray")
EXAMPLES = "worker_runtime.examples:registry"


@contextmanager
def local_ray() -> Iterator[str]:
    """A real local Ray for one test module; yields its address. On the way out, every
    process it started is gone (later tests of this process count their descendants)."""
    import ray

    before = children()
    context = ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
        runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
    )  # fmt: skip
    try:
        yield str(context.address_info["address"])
    finally:
        ray.shutdown(wait_for_processes=True)
        none_left_since(before)


def children() -> set[int]:
    """The pids of this process's descendants (before a Ray starts, for `none_left_since`)."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def none_left_since(before: set[int]) -> None:
    """Every descendant started since ``before`` (a Ray's processes) gone, reaped too."""

    def started() -> list[psutil.Process]:
        found = psutil.Process().children(recursive=True)
        return [p for p in found if p.pid not in before and alive(p.pid)]

    if not wait_for(lambda: not started(), 20):
        for process in started():  # Ray's, started by the fixture: none may linger
            with contextlib.suppress(psutil.Error):
                process.kill()
    for process in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError):
            if process.pid not in before and process.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(process.pid, 0)  # reaped: not even a zombie stays


def alive(pid: int) -> bool:
    """Running (a zombie is dead: it waits only for its parent to reap it)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def descendants(pid: int) -> list[int]:
    """Live descendants of ``pid`` (its fork server, lifeline and sandboxes)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p.pid for p in children if alive(p.pid)]


def nice_values(pid: int) -> set[int]:
    """The nice values of every thread of ``pid`` (nice is per thread on Linux)."""
    values = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/stat") as stat:
            values.add(int(stat.read().rsplit(")", 1)[1].split()[16]))
    return values


def host_prefix(pid: int) -> str:
    """The prefix of every cgroup of the sandboxes of host ``pid`` (see sandbox.lifeline)."""
    return f"sv-{pid}-{host_start_time(pid)}-"


def cgroups_of(prefix: str) -> list[str]:
    """The cgroups named with ``prefix`` in every hierarchy of this machine."""
    found = []
    for hierarchy in detect_layout().hierarchies:
        try:
            names = os.listdir(hierarchy.parent)
        except OSError:
            continue
        found += [os.path.join(hierarchy.parent, n) for n in names if n.startswith(prefix)]
    return found


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())
