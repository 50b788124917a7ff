"""Waiting for an end that a cancellation must not cut short (asyncio)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def to_the_end(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` (as a task) to its end even if the waiter is cancelled
    meanwhile, any number of times; then return its result, or re-raise the waiter's
    cancellation if there was one."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done() and task.cancelled() and cancelled is None:
                raise  # the task itself was cancelled (its loop is closing)
            cancelled = exc
        except BaseException:
            break  # its own failure: `result` raises it below
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: asyncio logs none as "never retrieved"
        raise cancelled
    return task.result()
