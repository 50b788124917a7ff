"""`supervisor.workers.pipes.PipeStream`, `supervisor._loop.current_loop` and
`run_in_daemon_thread` on both loops the supervisor runs on: real pipes, real readiness,
real closing, real threads."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable

import anyio
import pytest
import trio

from supervisor._loop import current_loop, run_in_daemon_thread
from supervisor.workers.pipes import PipeStream

Scenario = Callable[[], Awaitable[None]]


def on_both_loops(scenario: Scenario) -> None:
    """Run ``scenario`` under trio and under asyncio (anyio picks the backend)."""
    for backend in ("trio", "asyncio"):
        anyio.run(scenario, backend=backend)


def test_a_pipe_reads_what_arrives_then_eof() -> None:
    async def scenario() -> None:
        read_fd, write_fd = os.pipe()
        stream = PipeStream(read_fd)
        got: list[bytes] = []
        async with anyio.create_task_group() as group:

            async def reader() -> None:
                while data := await stream.receive_some(4):
                    got.append(data)

            group.start_soon(reader)
            await anyio.sleep(0.01)  # the reader waits on an empty pipe
            os.write(write_fd, b"hello")
            await anyio.sleep(0.01)
            os.close(write_fd)
        assert b"".join(got) == b"hello" and got[0] == b"hell"
        await stream.aclose()
        assert stream.fileno() == -1

    on_both_loops(scenario)


def test_closing_wakes_a_waiting_reader_and_the_fd_is_gone() -> None:
    async def scenario() -> None:
        read_fd, write_fd = os.pipe()
        stream = PipeStream(read_fd)
        woke: list[type[BaseException]] = []
        async with anyio.create_task_group() as group:

            async def reader() -> None:
                try:
                    await stream.receive_some(10)
                except anyio.ClosedResourceError as exc:
                    woke.append(type(exc))

            group.start_soon(reader)
            await anyio.sleep(0.01)
            await stream.aclose()
            await stream.aclose()  # once only
        assert woke == [anyio.ClosedResourceError]
        with pytest.raises(OSError):
            os.fstat(read_fd)
        with pytest.raises(anyio.ClosedResourceError):
            await stream.receive_some(1)
        os.close(write_fd)

    on_both_loops(scenario)


def test_a_full_pipe_blocks_the_writer_only_and_a_gone_reader_is_broken() -> None:
    async def scenario() -> None:
        read_fd, write_fd = os.pipe()
        sink = PipeStream(write_fd)
        big = b"x" * (1 << 20)  # far more than a pipe holds
        async with anyio.create_task_group() as group:
            group.start_soon(sink.send_all, big)
            await anyio.sleep(0.01)  # the writer waits; this task runs on
            taken = bytearray()
            while len(taken) < len(big):
                await anyio.wait_readable(read_fd)
                taken += os.read(read_fd, 1 << 16)
        assert taken == big
        os.close(read_fd)
        with pytest.raises(anyio.BrokenResourceError):
            await sink.send_all(b"nobody reads")
        await sink.aclose()

    on_both_loops(scenario)


def test_the_loop_primitives_are_the_running_loops_own() -> None:
    seen: set[str] = set()

    async def scenario() -> None:
        loop = current_loop()
        event = loop.event()
        name = "trio" if isinstance(event, trio.Event) else "asyncio"
        assert isinstance(event, trio.Event | asyncio.Event)
        assert abs(loop.now() - anyio.current_time()) < 0.05  # anyio deadlines' clock
        read_fd, write_fd = os.pipe()
        try:
            with anyio.move_on_after(0.05) as scope:
                await loop.wait_readable(read_fd)  # nothing to read: it waits
            assert scope.cancelled_caught
            os.write(write_fd, b"!")
            with anyio.fail_after(5):
                await loop.wait_readable(read_fd)
            event.set()
            await event.wait()
        finally:
            os.close(read_fd)
            os.close(write_fd)
        seen.add(name)

    on_both_loops(scenario)
    assert seen == {"trio", "asyncio"}


def test_a_daemon_thread_runs_the_function_and_a_cancel_waits_for_it() -> None:
    async def scenario() -> None:
        seen: list[tuple[bool, bool]] = []

        def work() -> str:
            thread = threading.current_thread()
            seen.append((thread.daemon, thread is threading.main_thread()))
            time.sleep(0.2)
            return "done"

        assert await run_in_daemon_thread(work) == "done"
        assert seen == [(True, False)]
        with pytest.raises(ZeroDivisionError):
            await run_in_daemon_thread(lambda: 1 / 0)
        began = time.monotonic()
        with anyio.move_on_after(0.05):  # anyio's cancellation waits for the function
            await run_in_daemon_thread(work)
        assert time.monotonic() - began >= 0.2

    on_both_loops(scenario)


def test_asyncio_task_cancel_waits_for_the_daemon_thread_then_propagates() -> None:
    async def main() -> None:
        ended = threading.Event()

        def work() -> None:
            time.sleep(0.2)
            ended.set()

        task = asyncio.create_task(run_in_daemon_thread(work))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ended.is_set()

    asyncio.run(main())
