"""The running loop's own primitives, picked once per session or pool.

The supervisor is written against anyio, so it runs on trio and on asyncio; but anyio's
generic entry points look the backend up at every call (``anyio.Event()`` costs about 4 us
on trio against 0.5 us for ``trio.Event()``, measured), and a call's hot path makes an
event, reads the clock and waits for a pipe a few times per call. These are the same
operations, taken from the loop directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import sniffio


class Signal(Protocol):
    """A one-shot event (``trio.Event``, ``asyncio.Event``, ``anyio.Event``)."""

    def set(self) -> Any: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class LoopPrimitives:
    """``now``: the loop's clock (anyio deadlines are in it); ``event``: a new `Signal`;
    ``wait_readable``: wait until an fd is readable."""

    now: Callable[[], float]
    event: Callable[[], Signal]
    wait_readable: Callable[[int], Awaitable[None]]


def current_loop() -> LoopPrimitives:
    """The primitives of the loop running in this thread (trio's or asyncio's)."""
    if sniffio.current_async_library() == "trio":
        import trio

        clock = trio.lowlevel.current_clock()
        return LoopPrimitives(clock.current_time, trio.Event, trio.lowlevel.wait_readable)
    return LoopPrimitives(asyncio.get_running_loop().time, asyncio.Event, anyio.wait_readable)
