"""Serving a protocol on this process's stdin and stdout, with trio streams that a
cancellation can always interrupt (no thread stuck in a blocking read).

`protocol_fds` gives the protocol private copies of fds 0 and 1 and points fd 0 at
/dev/null and fd 1 at stderr meanwhile, so nothing else in the process (a stray print, a
library's log) can write into the protocol. `stop_on_signals` turns SIGTERM/SIGINT into
an orderly stop (and a second one into an immediate one). `LineReader` and `TextWriter`
adapt trio streams to the text-line interface the MCP SDK's ``stdio_server`` takes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator

import trio

from supervisor.commands.serve_wire import LineBuffer, TooLong

log = logging.getLogger(__name__)

READ_SIZE = 65536


@contextlib.contextmanager
def protocol_fds() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the protocol (the caller owns and closes them);
    fd 0 is /dev/null and fd 1 is stderr meanwhile. Both are restored afterwards, with
    their blocking mode (a trio stream makes its fd non-blocking)."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    flags = [fcntl.fcntl(fd, fcntl.F_GETFL) for fd in (proto_in, proto_out)]
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield proto_in, proto_out
    finally:
        for fd, flag in zip((saved_in, saved_out), flags, strict=True):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETFL, flag)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (null, saved_in, saved_out):
            os.close(fd)


async def stop_on_signals(stop: Callable[[], None], hard: trio.CancelScope) -> None:
    """SIGTERM/SIGINT: ``stop()`` (an orderly stop); a second one cancels ``hard``."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        stopping = False
        async for _ in signals:
            if stopping:
                hard.cancel()
                return
            stopping = True
            stop()


class LineReader:
    """``async for line in reader``: UTF-8 lines (without the newline) of a stream; a
    line over ``limit`` bytes is dropped (and logged)."""

    def __init__(self, source: trio.abc.ReceiveStream, limit: int = 64 * 1024 * 1024) -> None:
        self.source = source
        self.limit = limit

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        buffer = LineBuffer(self.limit)
        while data := await self.source.receive_some(READ_SIZE):
            for line in buffer.feed(bytes(data)):
                if isinstance(line, TooLong):
                    log.warning("dropped an input line over %s bytes", self.limit)
                elif line.strip():
                    yield line.decode("utf-8", errors="replace")


class TextWriter:
    """``await write(text)`` and ``await flush()`` over a trio stream (UTF-8)."""

    def __init__(self, sink: trio.abc.SendStream) -> None:
        self.sink = sink
        self._pending: list[bytes] = []
        self._sending = trio.Lock()  # two writers (the SDK, a guard) share the stream

    async def write(self, text: str) -> None:
        self._pending.append(text.encode("utf-8"))

    async def flush(self) -> None:
        data, self._pending = b"".join(self._pending), []
        if data:
            async with self._sending:
                await self.sink.send_all(data)
