"""The jq engine child: reads `JqRequest` frames, runs each jq command, writes replies.

Started by ``engine.py`` as ``python -I -B -c BOOTSTRAP ...`` with an empty environment,
in a session of its own, with requests on fd 0, replies on the fd named in its
arguments and fds 1 and 2 on a diagnostics pipe (nothing stray can corrupt a reply). It
first ties its life to the host's (``PR_SET_PDEATHSIG``, then checks that the host did
not die before that), then takes its limits (``RLIMIT_AS``, no core dumps). It holds no
state between calls except compiled filters, and exits on end of input.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import time

from ..common import OutputLimitError, limit_result
from .command import run_jq
from .limits import STOPPED_STATUS, memory_message
from .wire import (
    EngineReady,
    FrameBuffer,
    JqReply,
    WireError,
    decode_request,
    frame,
    from_wire,
    to_wire,
)

PR_SET_PDEATHSIG = 1


def _die_with_host(host: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(70)  # cannot tie our life to the host's: refuse to run
    if os.getppid() != host:
        os._exit(0)  # the host died before the signal was armed


def _limit(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _answer(body: bytes, memory_bytes: int) -> JqReply:
    try:
        request = decode_request(body)
        args = [from_wire(a) for a in request.args]
        stdin = None if request.stdin is None else from_wire(request.stdin)
        try:
            result = run_jq(args, stdin)
        except OutputLimitError:
            result = limit_result("jq", STOPPED_STATUS)
        return JqReply(to_wire(result.stdout), to_wire(result.stderr), result.exit_code)
    except MemoryError:
        return JqReply(b"", memory_message(memory_bytes).encode(), STOPPED_STATUS, True)
    except WireError as exc:
        return JqReply(b"", f"jq: error: jq engine: {exc}\n".encode(), STOPPED_STATUS, True)
    except Exception as exc:  # a defect: say so, never crash the host's call silently
        text = f"jq: error: internal error ({type(exc).__name__}: {exc})\n"
        return JqReply(b"", to_wire(text), STOPPED_STATUS)


#: After a reply, how long the child polls for the next request before sleeping, when
#: the last one came that fast (a loop of jq calls): a sleeping process wakes in tens of
#: microseconds and runs its first filter slower, cold. An isolated call spins not at all.
SPIN_SECONDS = 0.001


class _Reader:
    """Reads requests, polling first while requests come in a burst."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.burst = False
        os.set_blocking(fd, False)

    def read(self) -> bytes:
        fd = self.fd
        start = time.monotonic()
        until = start + SPIN_SECONDS if self.burst else start
        while True:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                if time.monotonic() >= until:
                    break
                os.sched_yield()  # the host may share this CPU
            else:
                self.burst = True
                return data
        select.select([fd], [], [])
        self.burst = time.monotonic() - start < SPIN_SECONDS
        return os.read(fd, 1 << 20)


def serve(requests: int, replies: int, memory_bytes: int) -> None:
    """Answer requests until end of input (or a reply that retires this child)."""
    buffer = FrameBuffer(memory_bytes)
    reader = _Reader(requests)
    while True:
        body = buffer.next_frame()
        if body is None:
            data = reader.read()
            if not data:
                return
            buffer.feed(data)
            continue
        reply = _answer(body, memory_bytes)
        try:
            data = frame(reply)
        except MemoryError:
            reply = JqReply(b"", memory_message(memory_bytes).encode(), STOPPED_STATUS, True)
            data = frame(reply)
        _write_all(replies, data)
        if reply.retire:
            return


def main(argv: list[str]) -> None:
    host, replies, memory_bytes = (int(a) for a in argv)
    _die_with_host(host)
    _limit(memory_bytes)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _write_all(replies, frame(EngineReady(os.getpid())))
    with contextlib.suppress(BrokenPipeError, WireError):  # the host went away
        serve(0, replies, memory_bytes)
    os._exit(0)
