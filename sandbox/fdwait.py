"""Waiting for an fd to become readable, synchronously, with a timeout.

For a pidfd (the process exited) and the fork server's socket (it said ``ready``): the
few places that must block a thread briefly. ``poll``, not ``select``: a busy host's fds
may be numbered above ``FD_SETSIZE``.
"""

from __future__ import annotations

import select


def wait_readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` became readable within ``timeout`` seconds (0: is it now)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0 if timeout <= 0 else max(1, int(timeout * 1000))))
