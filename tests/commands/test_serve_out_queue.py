"""The serve session's output queue: direct writes when idle, order always kept."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator

import pytest
import trio

from supervisor.commands.serve_session import OutQueue


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # the smallest: easy to fill
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        chunks.append(chunk)


async def test_an_idle_queue_writes_a_line_at_once(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    out = OutQueue(write_end)
    out.put(b'{"event":"pong","id":1}\n')
    assert read_all(read_end) == b'{"event":"pong","id":1}\n'
    assert out.queued == 0  # nothing left for the writer


async def test_what_the_pipe_cannot_take_waits_for_the_writer_in_order(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    out = OutQueue(write_end)
    big = b"a" * 10_000 + b"\n"
    out.put(big)  # partly written: the pipe holds 4,096 bytes
    assert 0 < out.queued < len(big)
    out.put(b"second\n")  # queued behind the rest, never written ahead of it
    first = read_all(read_end)
    rest = await out.take()
    assert rest is not None and first + rest == big + b"second\n"
    out.put(b"third\n")  # the writer holds lines taken and not yet written: queued
    assert read_all(read_end) == b"" and out.queued == len(b"third\n")
    out.close()
    assert await out.take() == b"third\n"  # the last write is done when it asks again
    assert await out.take() is None


async def test_a_broken_client_leaves_the_line_to_the_writer() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.close(read_end)
    try:
        out = OutQueue(write_end)
        out.put(b"lost?\n")  # EPIPE: the writer's send fails and it reports the client gone
        assert out.queued == len(b"lost?\n")
    finally:
        os.close(write_end)


async def test_without_an_fd_every_line_goes_through_the_writer() -> None:
    out = OutQueue()
    out.put(b"one\n")
    out.put(b"two\n")
    with trio.fail_after(5):
        assert await out.take() == b"one\ntwo\n"
