"""Mailboxes: how the supervisor's thread hands results to a caller somewhere else.

The supervisor lives in its own trio thread (`supervisor.hosting.host_thread`). A caller
in another thread, an asyncio loop or another trio run gives each call a mailbox; the
supervisor's thread ``post``s to it (chunks, then the end) and never blocks doing so.
The caller takes the items out in its own thread, so its callbacks run where it expects.

``post`` is safe from any thread and never raises: a mailbox whose loop has gone away
drops what it gets (its caller cannot be waiting any more).
"""

from __future__ import annotations

import asyncio
import collections
import queue
from typing import Any, Protocol

import trio


class Mailbox(Protocol):
    """Where a call's events go; ``post`` is thread-safe and never blocks."""

    def post(self, item: Any) -> None: ...


class BlockingMailbox:
    """For synchronous callers: ``get`` blocks the calling thread."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def post(self, item: Any) -> None:
        self._queue.put(item)

    def get(self, timeout: float | None = None) -> Any:
        """The next item; `queue.Empty` after ``timeout`` seconds."""
        return self._queue.get(timeout=timeout)


class AsyncioMailbox:
    """For asyncio callers (a script on an asyncio loop calling a `SyncSupervisor` tool):
    ``await get()`` in the loop the mailbox was made in."""

    __slots__ = ("_items", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def post(self, item: Any) -> None:
        try:  # noqa: SIM105 (hot path: a bare try costs less than contextlib.suppress)
            self._loop.call_soon_threadsafe(self._put, item)
        except RuntimeError:  # the loop is closed: nobody is waiting
            pass

    def _put(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()


class TrioMailbox:
    """For callers in a trio run other than the supervisor's: ``await get()``."""

    __slots__ = ("_event", "_items", "_token")

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._items: collections.deque[Any] = collections.deque()
        self._event = trio.Event()

    def post(self, item: Any) -> None:
        try:  # noqa: SIM105 (hot path)
            self._token.run_sync_soon(self._put, item)
        except trio.RunFinishedError:
            pass

    def _put(self, item: Any) -> None:
        self._items.append(item)
        self._event.set()

    async def get(self) -> Any:
        while not self._items:
            await self._event.wait()
            self._event = trio.Event()
        return self._items.popleft()


AsyncMailbox = AsyncioMailbox | TrioMailbox


def current_loop_mailbox() -> AsyncMailbox:
    """A mailbox for the event loop running this coroutine (trio or asyncio)."""
    if trio.lowlevel.in_trio_run():
        return TrioMailbox()
    try:
        return AsyncioMailbox(asyncio.get_running_loop())
    except RuntimeError:
        raise RuntimeError("not running in a trio or asyncio event loop") from None
