"""`AsyncioSupervisor` from real asyncio programs (``asyncio.run``): results, chunks in the
loop's thread, task cancellation as a cooperative cancel, the same outcomes as from
trio, handles, refusals, scripts with sandboxed tools, and a clean close."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.lowlevel
import psutil
import pytest
import trio
from hosting_helpers import (
    EXAMPLES,
    child_env,
    descendants,
    host_threads,
    survivors,
)
from proc_helpers import fd_table, fds_opened

from sandbox.cgroups import detect_layout
from supervisor import DuplicateOperation, Supervisor, SupervisorError
from supervisor.hosting import AsyncioSupervisor
from supervisor.ledger import InvalidInput, UnknownTool
from supervisor.scripted import ScriptedTool
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.outcome import Outcome


def run(main: Callable[[AsyncioSupervisor], Awaitable[Any]], **kwargs: Any) -> Any:
    """``asyncio.run`` a program that gets a started supervisor; checks it closed clean."""
    kwargs.setdefault("adapters", [EXAMPLES])
    kwargs.setdefault("ping_interval", None)
    holder: list[AsyncioSupervisor] = []

    async def program() -> Any:
        async with AsyncioSupervisor(**kwargs) as sup:
            holder.append(sup)
            return await main(sup)

    result = asyncio.run(program())
    assert not host_threads()
    assert not survivors(holder[0].supervisor)
    return result


async def first_chunk(sup: AsyncioSupervisor, tool: str, value: str) -> tuple[Any, list[str]]:
    """Start ``invoke`` as a task and return once its first chunk arrived."""
    chunks: list[str] = []
    got = asyncio.Event()

    def on_chunk(text: str) -> None:
        chunks.append(text)
        got.set()

    task = asyncio.create_task(sup.invoke(tool, value, on_chunk=on_chunk))
    await asyncio.wait_for(got.wait(), 10)
    return task, chunks


async def next_event(events: Any, timeout: float = 10) -> CallEvent:
    event: CallEvent = await asyncio.wait_for(events.__anext__(), timeout)
    return event


def test_an_asyncio_program_calls_streams_and_closes_clean() -> None:
    fds = fd_table()
    loop_thread = threading.get_ident()

    async def main(sup: AsyncioSupervisor) -> None:
        assert "text.upper" in sup.tools and sup.running
        out = await sup.invoke("text.upper", "héllo", deadline=5)
        assert (out.status, out.value) == ("completed", "HÉLLO")
        out = await sup.invoke("json.echo", {"a": [1, None]})
        assert out.value == {"a": [1, None]}
        seen: list[tuple[str, int]] = []
        out = await sup.invoke(
            "progress.count", "5", on_chunk=lambda t: seen.append((t, threading.get_ident()))
        )
        assert out.status == "completed" and out.chunks == 5
        assert seen == [(str(i), loop_thread) for i in range(1, 6)]  # in order, in the loop
        calls: list[str] = []

        def failing(text: str) -> None:
            calls.append(text)
            raise RuntimeError("a broken progress display")

        out = await sup.invoke("progress.count", "3", on_chunk=failing)
        assert (out.status, calls) == ("completed", ["1"])  # logged, then no more chunks
        outs = await asyncio.gather(*(sup.invoke("text.reverse", f"ab{i}") for i in range(12)))
        assert [o.value for o in outs] == [f"ab{i}"[::-1] for i in range(12)]

    run(main, pool_size=2, max_in_flight=2)
    assert not fds_opened(fds)


def test_cancelling_the_task_is_a_cooperative_cancel() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        async with sup.audit_events() as events:
            task, chunks = await first_chunk(sup, "progress.count", "1000/0.02")
            began = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - began < 3  # acknowledged, not killed after a grace
            event = await next_event(events)
            assert (event.tool, event.status, event.kill_reason) == (
                "progress.count",
                "cancelled",
                None,
            )
            assert chunks and event.chunks >= len(chunks)
            # asyncio.timeout() cancels the same way and becomes TimeoutError
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await sup.invoke("sleep", "30")
            event = await next_event(events)
            assert (event.tool, event.status) == ("sleep", "cancelled")
            # the worker acknowledged and lives on
            assert (await sup.invoke("text.upper", "ok")).status == "completed"

    run(main)


def test_a_cancel_the_adapter_ignores_ends_indeterminate_as_from_trio() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        async with sup.audit_events() as events:
            task = asyncio.create_task(sup.invoke("stubborn.sleep", "30"))
            await asyncio.sleep(0.3)
            task.cancel()
            began = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert 0.15 <= time.monotonic() - began < 5  # waited for the grace and the kill
            event = await next_event(events)
            assert (event.status, event.kill_reason) == ("indeterminate", "host_cancel")
            pending = await sup.call_in_host(_indeterminate_ids)
            assert event.op_id in pending

    run(main, cancel_grace=0.2)


async def _indeterminate_ids(sup: Supervisor) -> list[int]:
    return [info.id for info in sup.ledger.indeterminate()]


# -- the same outcomes as from trio -----------------------------------------------------------

SCENARIOS: list[tuple[str, str, float | None]] = [
    ("text.upper", "abc", None),
    ("progress.count", "not a number", None),
    ("progress.count", "3", None),
    ("sleep", "30", 0.3),
    ("stubborn.sleep", "30", 0.3),
    ("uncancellable.sleep", "0.05", None),
]


def _shape(outcome: Outcome) -> tuple[Any, ...]:
    return (outcome.tool, outcome.status, outcome.value, outcome.error_code,
            outcome.kill_reason, outcome.chunks)  # fmt: skip


async def test_outcomes_are_the_same_as_from_trio() -> None:
    # a grace of 1 s for the cooperative deadline and cancel to be acknowledged in (0.2 s
    # was missed at load in the Ray tests' like supervisor; the stubborn one is killed)
    kwargs: dict[str, Any] = {"adapters": [EXAMPLES], "ping_interval": None, "cancel_grace": 1.0}
    from_trio = []
    async with Supervisor(**kwargs) as sup:
        for tool, value, deadline in SCENARIOS:
            from_trio.append(_shape(await sup.invoke(tool, value, deadline=deadline)))
        handle = await sup.start("sleep", "30")
        await trio.sleep(0.2)
        from_trio.append(_shape(await handle.cancel()))

    async def main(asup: AsyncioSupervisor) -> list[tuple[Any, ...]]:
        shapes = []
        for tool, value, deadline in SCENARIOS:
            shapes.append(_shape(await asup.invoke(tool, value, deadline=deadline)))
        handle = await asup.start("sleep", "30")
        await asyncio.sleep(0.2)
        shapes.append(_shape(await handle.cancel()))
        return shapes

    from_asyncio = await trio.to_thread.run_sync(lambda: run(main, **kwargs))
    assert from_asyncio == from_trio
    statuses = [shape[1] for shape in from_trio]
    assert statuses == ["completed", "failed", "completed", "timed_out", "indeterminate",
                        "completed", "cancelled"]  # fmt: skip


# -- handles, refusals, life -----------------------------------------------------------------


def test_handles_stream_to_the_loop_and_cancel_with_an_outcome() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        chunks: list[str] = []
        got = asyncio.Event()

        def on_chunk(text: str) -> None:
            chunks.append(text)
            got.set()

        handle = await sup.start("progress.count", "1000/0.02", on_chunk=on_chunk)
        assert handle.op_id is not None and not handle.done
        await asyncio.wait_for(got.wait(), 10)
        # cancelling a wait for the outcome leaves the call running
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(handle.outcome(), 0.1)
        assert not handle.done
        out = await handle.cancel()
        assert out.status == "cancelled" and out.op_id == handle.op_id and chunks
        assert (await handle.outcome()) is out and handle.done
        done = await sup.start("text.upper", "x")
        assert (await done.outcome()).status == "completed"
        assert (await done.cancel()).status == "completed"  # too late to cancel

    run(main)


def test_refusals_raise_in_the_caller_and_leave_the_supervisor_working() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        with pytest.raises(UnknownTool):
            await sup.invoke("no.such.tool", "x")
        with pytest.raises(InvalidInput):
            await sup.invoke("json.echo", float("nan"))
        with pytest.raises(UnknownTool):
            await sup.start("no.such.tool", "x")
        handle = await sup.start("sleep", "30", idempotency_key="order-1")
        with pytest.raises(DuplicateOperation):
            await sup.invoke("sleep", "0", idempotency_key="order-1")
        assert (await handle.cancel()).status == "cancelled"
        with pytest.raises(ZeroDivisionError):
            await sup.call_in_host(_divide)
        assert (await sup.invoke("text.upper", "still")).value == "STILL"
        return None

    run(main)


async def _divide(sup: Supervisor) -> float:
    return 1 / 0


def test_a_supervisor_that_cannot_start_raises_and_leaves_no_thread() -> None:
    async def main() -> None:
        with pytest.raises(Exception, match="not installed"):
            async with AsyncioSupervisor(adapters=["no_such_module_xyz:registry"]):
                pass

    asyncio.run(main())
    assert not host_threads()
    with pytest.raises(ValueError):
        AsyncioSupervisor(adapters=[EXAMPLES], pool_size=0)  # checked in the caller


def test_closing_cancels_running_calls_and_refuses_new_ones() -> None:
    async def main() -> None:
        sup = AsyncioSupervisor(adapters=[EXAMPLES], ping_interval=None)
        async with sup:
            task, _ = await first_chunk(sup, "progress.count", "1000/0.02")
            events = sup.audit_events()
            await sup.aclose()
            with pytest.raises(SupervisorError, match="stopped while the call ran"):
                await task
        assert not sup.running
        with pytest.raises(SupervisorError):
            await sup.invoke("text.upper", "x")
        assert [e.status async for e in events] == ["cancelled"]
        assert not survivors(sup.supervisor)

    asyncio.run(main())
    assert not host_threads()


def test_the_supervisor_runs_on_the_callers_loop_with_no_thread_between() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        assert sup.supervisor.loop_token == anyio.lowlevel.current_token()
        threads = {t.name for t in threading.enumerate()}
        assert not any(name.startswith("sandvisor-host") for name in threads)
        # the ledger is this loop's: read it directly, no hop
        out = await sup.invoke("text.upper", "x")
        assert sup.supervisor.ledger.outcome(out.op_id) is not None
        assert await sup.call_in_host(_indeterminate_ids) == []

    run(main)


def test_aclose_from_another_task_and_a_task_group_failure_cancel_cooperatively() -> None:
    async def main() -> None:
        sup = AsyncioSupervisor(adapters=[EXAMPLES], ping_interval=None)
        await sup.__aenter__()
        events = sup.audit_events()
        # a sibling's failure cancels the invoke: a cooperative cancel, then the error
        with pytest.raises(ExceptionGroup) as raised:
            async with asyncio.TaskGroup() as group:
                group.create_task(sup.invoke("sleep", "30"))
                await asyncio.sleep(0.3)
                raise LookupError("a sibling failed")
        assert raised.group_contains(LookupError)
        event = await next_event(events)
        assert (event.tool, event.status) == ("sleep", "cancelled")
        # closing from a task that did not enter it
        task, _ = await first_chunk(sup, "progress.count", "1000/0.02")
        await asyncio.create_task(sup.aclose())
        with pytest.raises(SupervisorError, match="stopped while the call ran"):
            await task
        assert [e.status async for e in events] == ["cancelled"]
        assert not sup.running and not survivors(sup.supervisor)

    asyncio.run(main())


def test_aclose_finishes_even_when_the_task_awaiting_it_is_cancelled() -> None:
    before = {p.pid for p in descendants()}  # an earlier test's child may still be exiting

    async def main() -> None:
        sup = AsyncioSupervisor(adapters=[EXAMPLES], ping_interval=None, cancel_grace=2.0)
        await sup.__aenter__()
        events = sup.audit_events()
        call = asyncio.create_task(sup.invoke("stubborn.sleep", "30"))  # ignores its cancel
        await asyncio.sleep(0.3)
        closer = asyncio.create_task(sup.aclose())
        await asyncio.sleep(0.2)  # the call is in its grace: the close waits for it
        assert not closer.done()
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer  # only once everything is closed
        assert sup.supervisor.state == "closed" and not survivors(sup.supervisor)
        with pytest.raises(SupervisorError, match="stopped while the call ran"):
            await call
        assert [(e.status, e.kill_reason) async for e in events] == [
            ("indeterminate", "host_cancel")
        ]

    asyncio.run(main())
    assert not [p for p in descendants() if p.pid not in before]


def test_a_supervisor_never_closed_is_closed_when_its_loop_ends() -> None:
    fds = fd_table()
    before = {p.pid for p in descendants()}
    holder: list[AsyncioSupervisor] = []
    started: list[psutil.Process] = []

    async def main() -> None:
        sup = AsyncioSupervisor(adapters=[EXAMPLES], ping_interval=None)
        await sup.__aenter__()
        holder.append(sup)
        asyncio.get_running_loop().create_task(sup.invoke("sleep", "30"))
        await asyncio.sleep(0.3)
        started.extend(p for p in descendants() if p.pid not in before)
        assert started  # the fork server and the worker's sandbox

    asyncio.run(main())  # cancels the runner task: the supervisor closes on the way out
    assert holder[0].supervisor.state == "closed"
    # not even a zombie: our own children are reaped by the close; the sandbox's inner
    # processes, orphaned when bwrap died, by the machine's init (pid 1), which may take a
    # moment on a loaded machine (seen failing at load 15)
    give_up = time.monotonic() + 10
    while (left := [p for p in started if p.is_running()]) and time.monotonic() < give_up:
        time.sleep(0.01)
    assert not left  # a child of ours left a zombie would stay one: nobody else reaps it
    assert not survivors(holder[0].supervisor)
    assert not fds_opened(fds)


def test_another_loop_is_refused_clearly_and_the_supervisor_works_on() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        async def from_elsewhere() -> None:
            await sup.invoke("text.upper", "x")

        with pytest.raises(SupervisorError, match="another event loop"):
            await asyncio.to_thread(asyncio.run, from_elsewhere())
        assert (await sup.invoke("text.upper", "still")).value == "STILL"

    run(main)


def test_a_script_in_another_thread_reaches_the_loop_through_its_token() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        shop = ScriptedTool("shop", timeout_seconds=60.0)
        shop.add_tool("upper", "upper-case stdin", sup.tool_callback("text.upper"))
        # execute_sync runs the script on a private loop in a worker thread
        result = await asyncio.to_thread(shop.execute_sync, "echo hi | upper")
        assert (result.stdout, result.exit_code) == ("HI\n", 0)

    run(main)


# -- scripts -----------------------------------------------------------------------------------


def test_a_scripted_tool_with_sandboxed_tools_runs_and_cancels_from_asyncio() -> None:
    async def main(sup: AsyncioSupervisor) -> None:
        shop = ScriptedTool("shop", timeout_seconds=60.0)
        shop.add_tool("upper", "upper-case stdin", sup.tool_callback("text.upper"))
        shop.add_tool("price", "a local tool", lambda params, stdin: '{"p": 3}\n')
        result = await shop.execute('price | jq -r .p | upper; echo "$(echo ab | upper)"')
        assert (result.stdout, result.exit_code) == ("3\nAB\n", 0)
        napper = ScriptedTool("napper", timeout_seconds=1.0)  # a short execution deadline
        napper.add_tool("nap", "sleep", sup.tool_callback("sleep", deadline=20))
        async with sup.audit_events() as events:
            # the execution deadline cancels the async callback: a cooperative cancel
            result = await napper.execute("echo 30 | nap; echo after")
            assert "callback timeout" in result.stderr
            event = await next_event(events)
            assert (event.tool, event.status) == ("sleep", "cancelled")
            # cancelling the task that runs the script cancels the call too
            task = asyncio.create_task(ScriptedTool.execute(napper, "echo 0.9 | nap"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            event = await next_event(events)
            assert (event.tool, event.status) == ("sleep", "cancelled")

    run(main)


@pytest.mark.parametrize("mode", ["stopped", "thread"])
def test_a_loop_stopped_without_aclose_lets_the_process_exit_and_leaves_nothing(
    mode: str,
) -> None:
    """The loop stops with the supervisor running (``run_forever`` then ``stop``; a loop
    thread stopped and joined, as a Ray actor's): the interpreter exits at once (a worker
    thread of the loop kept it alive forever before) and its death takes every sandbox and
    cgroup with it."""
    child = Path(__file__).with_name("asyncio_exit_child.py")
    proc = subprocess.run(
        [sys.executable, str(child), mode], capture_output=True, env=child_env(), timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    report = json.loads(proc.stdout)
    assert report["started"]  # the fork server, the lifeline, the sandbox of the call
    parents = [h.parent for h in detect_layout().hierarchies]

    def leftovers() -> list[str]:
        alive = [pid for pid in report["started"] if _alive(pid)]
        cgroups = [
            name for parent in parents for name in os.listdir(parent)
            if name.startswith(report["prefix"])
        ]  # fmt: skip
        return [*map(str, alive), *cgroups]

    deadline = time.monotonic() + 15
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leftovers()


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
