"""Waiting for a `RemoteCall` in the caller's own world: asyncio, another trio run, or a
plain thread. Each waiter dispatches the call's chunks to ``on_chunk`` in the caller's
thread, in order, and turns a cancellation of the waiting caller into a cooperative
cancel of the call: it keeps waiting (uncancellably, as a trio caller's shielded cancel
does) until the call has ended, then re-raises the caller's cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import trio

from supervisor.hosting.host_thread import Chunk, Ended, RemoteCall
from supervisor.hosting.mailbox import AsyncioMailbox, AsyncMailbox, BlockingMailbox
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import SupervisorError

log = logging.getLogger(__name__)

ChunkSink = Callable[[str], Any] | None


class ChunkDispatch:
    """Calls ``on_chunk``; one that raises is logged and hears no more (as in trio)."""

    __slots__ = ("callback",)

    def __init__(self, callback: ChunkSink) -> None:
        self.callback = callback

    def __call__(self, text: str) -> None:
        callback = self.callback
        if callback is None:
            return
        try:
            callback(text)
        except Exception:
            log.exception("on_chunk failed; no more chunks for this call")
            self.callback = None


def _take(item: Any, chunks: ChunkDispatch) -> Ended | None:
    if isinstance(item, Chunk):
        chunks(item.text)
        return None
    if isinstance(item, Ended):
        return item
    return None  # Started: the caller that wanted it read it already


async def _drain(box: AsyncMailbox, chunks: ChunkDispatch) -> Ended:
    while True:
        end = _take(await box.get(), chunks)
        if end is not None:
            return end


async def wait_async(box: AsyncMailbox, call: RemoteCall, on_chunk: ChunkSink) -> Ended:
    """Wait for ``call`` in an asyncio loop or a trio run (see the module docstring)."""
    chunks = ChunkDispatch(on_chunk)
    try:
        return await _drain(box, chunks)
    except trio.Cancelled:
        call.cancel()
        with trio.CancelScope(shield=True):
            await _drain(box, chunks)
        raise
    except asyncio.CancelledError:
        call.cancel()
        assert isinstance(box, AsyncioMailbox)
        while True:
            try:
                await _drain(box, chunks)
            except asyncio.CancelledError:
                continue
            raise


def wait_blocking(box: BlockingMailbox, call: RemoteCall, on_chunk: ChunkSink) -> Ended:
    """Wait for ``call`` in this thread. An interrupt (Ctrl-C) cancels the call; the
    wait for its end can be abandoned with a second one."""
    chunks = ChunkDispatch(on_chunk)
    try:
        while True:
            end = _take(box.get(), chunks)
            if end is not None:
                return end
    except BaseException:
        call.cancel()
        while True:
            if _take(box.get(), chunks) is not None:
                break
        raise


def outcome_of(end: Ended) -> Outcome:
    """The `Outcome` of an ended call, or the error it ended with."""
    if end.error is not None:
        raise end.error
    if end.outcome is None:
        raise SupervisorError("the supervisor stopped while the call ran (it was cancelled)")
    return end.outcome
