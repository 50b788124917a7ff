"""Which event loop, if any, runs in this thread: sync entry points must not block one."""

from __future__ import annotations

import asyncio
import sys


def in_event_loop() -> bool:
    """Whether this thread is running an asyncio or trio event loop right now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return True
    trio = sys.modules.get("trio")  # never imported just to ask
    return trio is not None and bool(trio.lowlevel.in_trio_run())
