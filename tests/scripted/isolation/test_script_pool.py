"""Scripts in child processes (``supervisor.scripted.isolation``): tools called back in the
host, and the backstop: a child that stops answering (SIGSTOP: as if stuck in a C call) is
killed at its deadline plus grace plus slack and replaced; a cancelled execution and a
child that dies end cleanly; the host's loop runs all the while."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import anyio
import psutil
import pytest

from supervisor.scripted import ScriptedTool
from supervisor.scripted.isolation import ScriptPool

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}
#: a backreference that backtracks until the deadline (CPU-bound in one regex call)
BUSY = "echo \"$(printf 'abcdefgh%.0s' $(seq 400))q\" | grep -cE '(.*)(.*)(.*)\\3\\2\\1$'"


def gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@pytest.fixture
def pool() -> Iterator[ScriptPool]:
    own = ScriptPool(size=1, max_children=4, slack=0.3)
    yield own
    pids = own.children()
    own.close()
    assert wait_until(lambda: all(gone(pid) for pid in pids))


def tool(pool: ScriptPool, timeout: float = 5.0) -> ScriptedTool:
    calls: list[dict[str, Any]] = []

    def get_user(params: dict[str, Any], stdin: str | None) -> str:
        calls.append(params)
        return f'{{"id": {params["id"]}, "pid": {os.getpid()}}}\n'

    async def shout(params: dict[str, Any], stdin: str | None) -> str:
        await anyio.sleep(0.01)
        return (stdin or "").upper()

    st = ScriptedTool("t", timeout_seconds=timeout, isolation=pool)
    st.add_tool("get_user", "Fetch a user", get_user, schema=SCHEMA)
    st.add_tool("shout", "Upper-case stdin", shout)
    return st


async def test_tools_run_in_the_host_and_the_script_in_a_child(pool: ScriptPool) -> None:
    st = tool(pool)
    script = (
        "for i in 1 2; do get_user --id $i | jq -r .pid; done; echo hi | shout; "
        "help | wc -l; echo $$ > /dev/null; sleep 0 & wait; get_user --id x; echo st=$?"
    )
    result = await st.execute(script)
    lines = result.stdout.splitlines()
    assert lines[:3] == [str(os.getpid())] * 2 + ["HI"], result
    assert lines[-1] == "st=2" and "get_user" in result.stderr
    trace = st.take_last_execution_trace()
    assert trace is not None and [i.name for i in trace.invocations][:2] == ["get_user"] * 2
    (child,) = pool.children()
    assert child != os.getpid()
    assert (await st.execute("echo again")).stdout == "again\n"
    assert pool.children() == [child]  # reused


async def test_a_stuck_child_is_killed_at_its_deadline_and_replaced(pool: ScriptPool) -> None:
    st = tool(pool, timeout=1.0)
    assert (await st.execute("echo warm")).stdout == "warm\n"
    (child,) = pool.children()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        started = time.monotonic()
        running: list[Any] = []

        async def run() -> None:
            running.append(await st.execute(f"echo before; get_user --id 1 >/dev/null; {BUSY}"))

        group.start_soon(run)
        await anyio.sleep(0.3)
        os.kill(child, signal.SIGSTOP)  # as if stuck in a call that never returns
        while not running:
            await anyio.sleep(0.01)
        elapsed = time.monotonic() - started
        group.cancel_scope.cancel()
    (result,) = running
    assert result.error == "resource limit exceeded: execution timeout (1s)", result
    assert 1.0 <= elapsed < 1.0 + 0.1 + 0.3 + 1.5  # deadline, grace, slack, a loaded host
    assert ticks >= 20  # the host's loop ran all the while
    assert wait_until(lambda: gone(child))
    assert (await st.execute("echo after")).stdout == "after\n"
    assert child not in pool.children()


async def test_the_request_timeout_holds_against_a_stuck_child(pool: ScriptPool) -> None:
    st = tool(pool, timeout=30.0)
    assert (await st.execute("echo warm")).stdout == "warm\n"
    (child,) = pool.children()
    os.kill(child, signal.SIGSTOP)
    started = time.monotonic()
    result = await st.execute_request({"commands": "echo x", "timeout_ms": 500})
    assert (result.exit_code, result.error) == (124, "timeout")
    assert time.monotonic() - started < 0.5 + 0.3 + 1.5
    assert wait_until(lambda: gone(child))


async def test_cancelling_the_caller_kills_the_child(pool: ScriptPool) -> None:
    st = tool(pool, timeout=30.0)
    assert (await st.execute("echo warm")).stdout == "warm\n"
    (child,) = pool.children()
    with anyio.move_on_after(0.5) as scope:
        await st.execute(BUSY)
    assert scope.cancelled_caught
    assert wait_until(lambda: gone(child))
    assert (await st.execute("echo next")).stdout == "next\n"


async def test_a_child_that_dies_gives_a_clean_error(pool: ScriptPool) -> None:
    st = tool(pool, timeout=30.0)
    assert (await st.execute("echo warm")).stdout == "warm\n"
    (child,) = pool.children()

    async def kill_soon() -> None:
        await anyio.sleep(0.3)
        os.kill(child, signal.SIGKILL)

    async with anyio.create_task_group() as group:
        group.start_soon(kill_soon)
        result = await st.execute(BUSY)
    assert result.exit_code == 1 and result.error is not None
    assert "the script's process died (signal 9)" in result.error
    assert (await st.execute("echo next")).stdout == "next\n"


def test_sync_callers_and_asyncio_use_the_pool_too(pool: ScriptPool) -> None:
    st = tool(pool)
    result = st.execute_sync("get_user --id 7 | jq .id; echo hi | shout")
    assert result.stdout == "7\nHI\n", result
    assert anyio.run(st.execute, "echo trio", backend="trio").stdout == "trio\n"


def script_children() -> list[int]:
    """This process's children that are script children (the pool's or leftovers)."""
    found = []
    for proc in psutil.Process().children():
        try:
            if any("isolation.child" in part for part in proc.cmdline()):
                found.append(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return [pid for pid in found if not gone(pid)]


async def test_a_start_cancelled_while_the_child_is_forked_leaves_no_child(
    pool: ScriptPool,
) -> None:
    before = set(script_children())
    with anyio.CancelScope() as scope:
        scope.cancel()  # the wait for the spawner is cancelled at its first look
        await pool.warm()
    assert scope.cancelled_caught and pool.children() == []
    assert wait_until(lambda: set(script_children()) <= before)
    await pool.warm()  # the pool starts children as before
    assert len(pool.children()) == 1


async def test_a_closed_pool_gives_a_clean_error(pool: ScriptPool) -> None:
    st = tool(pool)
    pool.close()
    result = await st.execute("echo x")
    assert (result.exit_code, result.error) == (1, "execution error: the script pool is closed")
