"""Starting sandboxes: for the calling thread or a `Spawner`'s (A25: a sandbox dies with
the thread that spawned it), from trio and asyncio; launch failures that leave nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

import pytest
import trio
from sandbox_helpers import (
    TREE,
    started,
    wait_for,
)

from sandbox.errors import LaunchError
from sandbox.handle import Sandbox
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import Spawner, spawn

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


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
