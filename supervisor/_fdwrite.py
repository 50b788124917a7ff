"""Writing to a non-blocking fd from a task, without waiting: what does not fit waits
for the fd's writer task, which owns the waiting (and reports a broken fd)."""

from __future__ import annotations

import os


def write_now(fd: int, data: bytes) -> bytes:
    """Write what ``fd`` takes at once; return the rest (all of it if the fd is full or
    broken: the writer task meets the same condition and deals with it)."""
    try:
        written = os.write(fd, data)
    except OSError:
        return data
    return data[written:] if written < len(data) else b""
