"""A contained Python child on three pipes: how the jq engines and the script pool's
children are started and ended.

The child is ``python -I -B -c BOOTSTRAP`` with an empty environment, ``/`` as its
directory and a session of its own; its stdin is our request pipe, its stdout and stderr
one diagnostics pipe, and the reply pipe's write end is passed as an fd number in its
argv (after the checkout's root, the host's pid, and its address-space limit, which the
child's ``main`` applies). Our three ends are non-blocking. It is forked on the host's
spawner thread (``spawner.py``) so that ``PR_SET_PDEATHSIG`` ties it to the host, not to
the thread that needed it; a start that does not come back within its timeout is killed
and reaped whenever it does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .text_tools.jq_tool.spawner import Spawner

#: The checkout this module belongs to: the child imports the same code.
ROOT = str(Path(__file__).resolve().parents[2])
#: Larger pipe buffers: a big request or reply crosses in fewer wake-ups.
PIPE_SIZE = 1 << 20

#: A started child: its process and our request (write), reply (read) and diagnostics
#: (read) fds.
Started = tuple[subprocess.Popen[bytes], int, int, int]


class StartTimeout(Exception):
    """The spawner did not start the child in time (the machine is out of breath)."""


def start(bootstrap: str, memory_bytes: int) -> Started:
    """Fork the child (call it on the spawner thread)."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    diag_r, diag_w = os.pipe()
    ours = (req_w, rep_r, diag_r)
    argv = [sys.executable, "-I", "-B", "-c", bootstrap, ROOT, str(os.getpid()), str(rep_w)]
    argv.append(str(memory_bytes))
    try:
        proc = subprocess.Popen(
            argv,
            stdin=req_r,
            stdout=diag_w,
            stderr=diag_w,
            pass_fds=(rep_w,),
            env={},
            cwd="/",
            start_new_session=True,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in (req_r, rep_w, diag_w):
            os.close(fd)
    for fd in ours:
        os.set_blocking(fd, False)
    for fd in (req_w, rep_r):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return proc, req_w, rep_r, diag_r


def start_waiting(spawner: Spawner, bootstrap: str, memory_bytes: int, timeout: float) -> Started:
    """`start` on ``spawner``'s thread, waiting at most ``timeout`` seconds for it
    (``StartTimeout``; the child, if it starts later, is shut then)."""
    future = spawner.submit(lambda: start(bootstrap, memory_bytes))
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.add_done_callback(shut_started)
        raise StartTimeout(f"the child did not start within {timeout:g} s") from None


def shut(proc: subprocess.Popen[bytes], fds: tuple[int, ...]) -> None:
    """SIGKILL, reap, close our ends (once: a ``weakref.finalize``'s function)."""
    with contextlib.suppress(ProcessLookupError):
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
    proc.wait()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def shut_started(future: concurrent.futures.Future[Started]) -> None:
    """A start nobody waits for any more: shut its child once it is there."""
    if not future.cancelled() and future.exception() is None:
        proc, *fds = future.result()
        shut(proc, tuple(fds))
