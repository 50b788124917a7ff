"""One jq engine: a child process that runs jq commands, and the host's ends of its pipes.

The child (``child.py``) is ``python -I -B`` with an empty environment, ``/`` as its
directory, a session of its own, no fds but its three pipes, ``RLIMIT_AS`` and no core
dumps, and ``PR_SET_PDEATHSIG``; it is forked from the host's spawner thread so that it
dies with the host, not with the thread that happened to need it. Besides that, a
``weakref.finalize`` kills and reaps it when its `JqEngine` is dropped or the host exits.

The host's pipe ends are non-blocking: `write_some` and `read_reply` never wait, the
callers (``calls.py``) choose how to wait (spin, ``poll``, or the event loop).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path

from .limits import MAX_REPLY_BYTES, JqLimits, died_message, memory_message, start_message
from .spawner import Spawner
from .wire import EngineReady, FrameBuffer, JqReply, WireError, decode_child_frame

#: The checkout this module belongs to: the child imports the same code.
ROOT = str(Path(__file__).resolve().parents[4])

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from supervisor.scripted.text_tools.jq_tool.child import main; main(sys.argv[2:])"
)

#: Larger pipe buffers: a big input or output crosses in fewer wake-ups.
_PIPE_SIZE = 1 << 20
_READ_SIZE = 1 << 16
_DIAGNOSTICS = 1 << 16


class EngineFailure(Exception):
    """No answer from the engine: ``message`` is what the jq command prints (exit 5)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _grow_pipe(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)


def _start(memory_bytes: int) -> tuple[subprocess.Popen[bytes], int, int, int]:
    """Fork the child (on the spawner thread); its process and our request, reply and
    diagnostics fds."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    diag_r, diag_w = os.pipe()
    ours = (req_w, rep_r, diag_r)
    argv = [sys.executable, "-I", "-B", "-c", BOOTSTRAP, ROOT, str(os.getpid()), str(rep_w)]
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
    _grow_pipe(req_w)
    _grow_pipe(rep_r)
    return proc, req_w, rep_r, diag_r


def _shut(proc: subprocess.Popen[bytes], fds: tuple[int, ...]) -> None:
    """SIGKILL, reap, close our ends (once: the finaliser's function)."""
    with contextlib.suppress(ProcessLookupError):
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
    proc.wait()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class JqEngine:
    """A started jq engine child; one call at a time (the pool sees to it)."""

    def __init__(self, limits: JqLimits, spawner: Spawner) -> None:
        try:
            proc, self.req_w, self.rep_r, self._diag_r = spawner.call(
                lambda: _start(limits.memory_bytes)
            )
        except OSError as exc:
            raise EngineFailure(start_message(str(exc))) from None
        self.proc = proc
        self.pid = proc.pid
        self.memory_bytes = limits.memory_bytes
        #: The child has said it is up (its first frame).
        self.ready = False
        self._buffer = FrameBuffer(MAX_REPLY_BYTES)
        self._shut = weakref.finalize(self, _shut, proc, (self.req_w, self.rep_r, self._diag_r))

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
                data = os.read(self.rep_r, min(max(buffer.pending(), _READ_SIZE), _PIPE_SIZE))
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
