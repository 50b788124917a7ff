"""One jq engine: a child process that runs jq commands, and the host's ends of its pipes.

The child (``child.py``) is started as ``piped_child`` starts one (``python -I -B``, an
empty environment, ``/`` as its directory, a session of its own, no fds but its three
pipes, forked from the host's spawner thread so that it dies with the host), and sets
``RLIMIT_AS``, no core dumps and ``PR_SET_PDEATHSIG`` itself. Besides that, a
``weakref.finalize`` kills and reaps it when its `JqEngine` is dropped or the host exits.

The host's pipe ends are non-blocking: `write_some` and `read_reply` never wait, the
callers (``calls.py``) choose how to wait (spin, ``poll``, or the event loop).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import weakref

from ...piped_child import PIPE_SIZE, StartTimeout, shut, start_waiting
from .limits import MAX_REPLY_BYTES, JqLimits, died_message, memory_message, start_message
from .spawner import Spawner
from .wire import EngineReady, FrameBuffer, JqReply, WireError, decode_child_frame

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from supervisor.scripted.text_tools.jq_tool.child import main; main(sys.argv[2:])"
)

#: How long a start may wait for the spawner thread (a loaded machine's fork and exec)
START_TIMEOUT = 20.0
_READ_SIZE = 1 << 16
_DIAGNOSTICS = 1 << 16


class EngineFailure(Exception):
    """No answer from the engine: ``message`` is what the jq command prints (exit 5)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JqEngine:
    """A started jq engine child; one call at a time (the pool sees to it)."""

    def __init__(self, limits: JqLimits, spawner: Spawner) -> None:
        try:
            proc, self.req_w, self.rep_r, self._diag_r = start_waiting(
                spawner, BOOTSTRAP, limits.memory_bytes, START_TIMEOUT
            )
        except (OSError, StartTimeout) as exc:
            raise EngineFailure(start_message(str(exc))) from None
        self.proc = proc
        self.pid = proc.pid
        self.memory_bytes = limits.memory_bytes
        #: The child has said it is up (its first frame).
        self.ready = False
        self._buffer = FrameBuffer(MAX_REPLY_BYTES)
        self._shut = weakref.finalize(self, shut, proc, (self.req_w, self.rep_r, self._diag_r))

    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    @property
    def closed(self) -> bool:
        return not self._shut.alive

    def kill(self) -> None:
        """SIGKILL and reap the child, close our fds (idempotent)."""
        self._shut()

    def stop(self) -> None:
        """SIGKILL the child now, without waiting for it to go (``kill`` reaps it): a
        child of some hundred MB takes a tenth of a second to tear down."""
        if not self.closed and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)

    def forget(self) -> None:
        """Close our fds and leave the child alone (a forked host's copy of the engine:
        the child belongs to the parent)."""
        if self._shut.detach() is not None:
            for fd in (self.req_w, self.rep_r, self._diag_r):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def write_some(self, pending: memoryview) -> memoryview:
        """Write what the pipe takes now; what is left."""
        try:
            written = os.write(self.req_w, pending)
        except BlockingIOError:
            return pending
        except BrokenPipeError:
            raise self.failure() from None
        return pending[written:]

    def read_reply(self) -> JqReply | None:
        """The reply if it has fully arrived; reads only what is there now."""
        buffer = self._buffer
        while True:
            try:
                body = buffer.next_frame()
                if body is not None:
                    message = decode_child_frame(body)
                    if isinstance(message, EngineReady) and not self.ready:
                        if message.pid != self.pid:
                            raise WireError(f"ready from pid {message.pid}, not {self.pid}")
                        self.ready = True
                        continue
                    if not self.ready or not isinstance(message, JqReply):
                        raise WireError(f"unexpected {type(message).__name__}")
                    return message
            except WireError as exc:
                self.kill()
                raise EngineFailure(died_message(f"protocol error: {exc}")) from None
            try:
                data = os.read(self.rep_r, min(max(buffer.pending(), _READ_SIZE), PIPE_SIZE))
            except BlockingIOError:
                return None
            if not data:
                raise self.failure()
            buffer.feed(data)

    def failure(self) -> EngineFailure:
        """The child closed its end: reap it and say why it died."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.stop()
            code = self.proc.wait()
        notes = self._diagnostics()  # before kill closes the fd
        self.kill()
        if not self.ready:
            detail = notes.strip().splitlines()[-1:] or [_how(code)]
            return EngineFailure(start_message(detail[0]))
        if "cannot allocate memory" in notes or "MemoryError" in notes:
            return EngineFailure(memory_message(self.memory_bytes))
        return EngineFailure(died_message(_how(code)))

    def _diagnostics(self) -> str:
        if self.closed:  # the fd number may be another file's by now
            return ""
        with contextlib.suppress(OSError):
            return os.read(self._diag_r, _DIAGNOSTICS).decode("utf-8", "replace")
        return ""


def _how(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit status {code}"
