"""A pipe end as an async byte stream on whatever loop runs the supervisor (trio or
asyncio, through anyio): the host ends of a worker's fds 3, 4, 1 and 2.

anyio has no stream over a bare fd (trio's ``FdStream`` is trio only), so this is one:
non-blocking ``os.read``/``os.write``, waiting for readiness only when the pipe is empty
or full. ``aclose`` wakes a task that waits on the fd (`anyio.ClosedResourceError`)
before the fd is closed, so an fd number is never reused under a waiter.
"""

from __future__ import annotations

import os

import anyio
import anyio.lowlevel


class PipeStream:
    """One end of a pipe, owned: ``aclose`` closes the fd."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    def fileno(self) -> int:
        """The fd, or -1 once closed."""
        return self._fd

    async def receive_some(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes``; ``b""`` at end of file. It waits for readability, then
        reads (a wait is a checkpoint): what arrives is returned as soon as it is read."""
        while True:
            fd = self._checked()
            await anyio.wait_readable(fd)
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:
                continue

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data``; `anyio.BrokenResourceError` if the reader is gone."""
        view = memoryview(data)
        while view:
            fd = self._checked()
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            except BrokenPipeError as exc:
                raise anyio.BrokenResourceError("the pipe's reader is gone") from exc
            view = view[written:]
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Close the fd (once), first waking whoever waits on it."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            anyio.notify_closing(fd)
            os.close(fd)
        await anyio.lowlevel.checkpoint()

    def _checked(self) -> int:
        if self._fd < 0:
            raise anyio.ClosedResourceError("the pipe end is closed")
        return self._fd
