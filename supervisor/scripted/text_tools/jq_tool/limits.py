"""The bounds of the jq engine processes and the messages a stopped filter gets.

libjq runs a filter in one C call that holds the GIL, so jq runs in child processes (see
``engine.py``); these are their limits. The messages are jq-style (``jq: error: ...``,
exit status 5) and shared by the host (which sees a child killed or dead) and the child
(which sees a ``MemoryError`` it can still report).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..common import MAX_OUTPUT_BYTES

#: The exit status of a filter stopped by a limit: jq's status for a runtime error.
STOPPED_STATUS = 5


def _default_engines() -> int:
    return max(4, min(16, 2 * (os.cpu_count() or 1)))


@dataclass(frozen=True, slots=True)
class JqLimits:
    """Limits of the jq engine children of one pool."""

    #: ``RLIMIT_AS`` of each child: a filter that builds a huge value is stopped here.
    memory_bytes: int = 1 << 30
    #: How long a call may wait when no execution deadline is set (direct calls).
    default_timeout: float = 30.0
    #: Children running at once (one per concurrent call); more callers wait for one.
    max_engines: int = _default_engines()
    #: How long the caller polls for the answer before sleeping on the pipe: a sleeping
    #: process takes tens of microseconds to wake, more than a small filter runs.
    spin_seconds: float = 0.0003

    def __post_init__(self) -> None:
        if self.memory_bytes < 64 << 20:
            raise ValueError("jq engine memory limit below 64 MiB: Python cannot start")
        if self.max_engines < 1 or self.default_timeout <= 0 or self.spin_seconds < 0:
            raise ValueError("jq engine limits must be positive")


#: The largest reply frame: stdout and stderr each at the output cap (characters, which
#: the child counts), 4 UTF-8 bytes a character.
MAX_REPLY_BYTES = 8 * MAX_OUTPUT_BYTES + 4096


def mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


def timeout_message(seconds: float) -> str:
    return f"jq: error: filter stopped at the execution deadline (after {seconds:.1f}s)\n"


def memory_message(memory_bytes: int) -> str:
    return f"jq: error: filter stopped: memory limit exceeded ({mib(memory_bytes)})\n"


def died_message(how: str) -> str:
    return f"jq: error: filter stopped: the jq engine died ({how})\n"


def start_message(why: str) -> str:
    return f"jq: error: cannot start the jq engine: {why}\n"
