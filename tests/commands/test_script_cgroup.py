"""script_cgroup: the services' script children each in a cgroup of their own (the
sandbox's cgroup code), with the pool's memory limit and a pids limit, removed with the
child (its own jq engines killed with it); nothing left after the pool is closed."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import psutil
import pytest
import trio

from sandbox.cgroups import detect_layout, parse_proc_cgroup
from supervisor.commands.script_cgroup import CHILD_PIDS, cgroup_confine
from supervisor.scripted import ScriptedTool
from supervisor.scripted.isolation import ScriptPool

MEMORY = 1 << 30


@pytest.fixture
def pool() -> Iterator[ScriptPool]:
    confine = cgroup_confine(MEMORY)
    if confine is None:
        pytest.skip("no cgroup with memory and pids can be made here (rlimits only)")
    pool = ScriptPool(size=0, max_children=2, confine=confine)
    yield pool
    pool.close()


def cgroup_name(pid: int) -> str:
    """The child's own cgroup (the last part of its memory cgroup's path)."""
    with open(f"/proc/{pid}/cgroup") as f:
        v2, v1 = parse_proc_cgroup(f.read())
    path = v1.get("memory") or v2
    assert path is not None
    return os.path.basename(path)


def dirs_of(name: str) -> list[str]:
    return [os.path.join(h.parent, name) for h in detect_layout().hierarchies]


def read_limit(directory: str, *files: str) -> int:
    for file in files:
        path = os.path.join(directory, file)
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read())
    raise AssertionError(f"none of {files} in {directory}")


def wait_until(predicate: object, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_each_child_runs_in_a_cgroup_of_its_own_with_its_limits(pool: ScriptPool) -> None:
    st = ScriptedTool("t", isolation=pool)
    result = st.execute_sync("echo '{\"a\": 1}' | jq .a")  # the child starts a jq engine
    assert (result.stdout, result.exit_code) == ("1\n", 0), result
    (pid,) = pool.children()
    name = cgroup_name(pid)
    assert name.startswith(f"sv-{os.getpid()}-"), name  # named as a sandbox's: collectable
    layout = detect_layout()
    memory_dir = next(
        os.path.join(h.parent, name) for h in layout.hierarchies if "memory" in h.roles
    )
    pids_dir = next(os.path.join(h.parent, name) for h in layout.hierarchies if "pids" in h.roles)
    assert read_limit(memory_dir, "memory.max", "memory.limit_in_bytes") == MEMORY
    assert read_limit(pids_dir, "pids.max") == CHILD_PIDS
    engines = psutil.Process(pid).children()
    assert engines and all(cgroup_name(e.pid) == name for e in engines)
    pool.close()  # the idle child is killed, reaped, and its cgroup removed
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs_of(name)))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    for engine in engines:
        assert not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE


def test_a_child_killed_mid_script_takes_its_cgroup_with_it(pool: ScriptPool) -> None:
    st = ScriptedTool(
        "t", isolation=pool, timeout_seconds=30, max_commands=10**9, max_loop_iterations=10**9
    )
    assert st.execute_sync("echo warm").stdout == "warm\n"
    (pid,) = pool.children()
    name = cgroup_name(pid)

    async def cancelled() -> None:
        with trio.move_on_after(0.5):  # a cancelled execution kills its child
            await st.execute("while :; do :; done")

    trio.run(cancelled)
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs_of(name)))
    assert pid not in pool.children()
    assert st.execute_sync("echo again").stdout == "again\n"  # a new child, confined too
    (new,) = pool.children()
    assert cgroup_name(new) != name and cgroup_name(new).startswith(f"sv-{os.getpid()}-")
