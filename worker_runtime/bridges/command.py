"""An adapter that runs a program: fixed argv, input on stdin, stdout as the result.

The program runs in its own session and process group. Cancel, its own timeout, the
call's deadline, or output beyond the bound stop the *whole group* (SIGTERM, a short
grace, SIGKILL) before the adapter returns or acknowledges; the worker's fatal exit
kills it too, from before the program is spawned. stderr is drained so the
program cannot block on it, and only its first bytes are kept (forwarded to the worker's
stderr as diagnostics). `subprocess` is imported only when a command first runs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..adapters import AdapterError, Cancelled, Context, DeadlineExceeded, Format, InvalidInput

if TYPE_CHECKING:
    import subprocess

POLL_SECONDS = 0.05
PIPE_CHUNK = 65536
LINGER_SECONDS = 0.2
GROUP_EXIT_SECONDS = 2.0
SPAWN_WAIT_SECONDS = 0.5  # an abort waits this long for a spawn under way


class CommandAdapter:
    """Run ``argv`` per call. Register with ``registry.add(tool, CommandAdapter([...]))``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        format: Format = "text",
        timeout: float = 30.0,
        max_output_bytes: int = 1024 * 1024,
        max_stderr_bytes: int = 64 * 1024,
        grace: float = 0.5,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a non-empty sequence of strings")
        if timeout <= 0 or grace < 0 or max_output_bytes < 1 or max_stderr_bytes < 0:
            raise ValueError("timeout and max_output_bytes must be > 0, grace >= 0")
        self.argv = list(argv)
        self.format = format
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.max_stderr_bytes = max_stderr_bytes
        self.grace = grace
        self.env = dict(env) if env is not None else None
        self.cwd = cwd

    def __call__(self, value: Any, ctx: Context) -> Any:
        data = self._encode_input(value)
        deadline = time.monotonic() + self.timeout
        if ctx.deadline is not None:
            deadline = min(deadline, ctx.deadline)
        ctx.raise_if_cancelled()
        kill_on_abort = _KillOnAbort()
        forget_hook = ctx.on_abort(kill_on_abort)  # before the program exists: no window
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = self._spawn()
        except OSError as exc:
            forget_hook()
            raise AdapterError(
                f"cannot start {self.argv[0]!r}: {exc.strerror}", code="unavailable"
            ) from None
        finally:
            kill_on_abort.started(proc)
        run = _Run(proc, data, self.max_output_bytes, self.max_stderr_bytes)
        try:
            stop = run.pump(ctx, deadline)
            if stop is None:
                stop = run.wait(ctx, deadline)
        finally:
            _stop_group(proc, self.grace if ctx.cancelled or run.running() else 0.0)
            forget_hook()
            run.close()
            run.forward_stderr(self.argv[0])
        if stop == "cancelled":
            raise Cancelled()
        if stop == "deadline":
            raise DeadlineExceeded(f"{self.argv[0]!r} did not finish in time")
        if stop == "too_large":
            raise AdapterError(
                f"output exceeds {self.max_output_bytes} bytes", code="output_too_large"
            )
        if proc.returncode != 0:
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with status {proc.returncode}"
            )
            raise AdapterError(f"{self.argv[0]!r} {how}", code="command_failed")
        return self._decode_output(bytes(run.stdout))

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start the program in a session (and process group) of its own. An abort
        meanwhile waits for this to return (`_KillOnAbort`); a test adapter wraps it to
        hold that window open."""
        import subprocess

        return subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            env=self.env,
            cwd=self.cwd,
        )

    def _encode_input(self, value: Any) -> bytes:
        if self.format == "text":
            if not isinstance(value, str):
                raise InvalidInput("text input expected")
            return value.encode()
        import msgspec

        return msgspec.json.encode(value)

    def _decode_output(self, data: bytes) -> Any:
        if self.format == "text":
            return data.decode(errors="replace")
        import msgspec

        try:
            return msgspec.json.decode(data)
        except msgspec.DecodeError:
            raise AdapterError("the command's output is not JSON", code="invalid_output") from None


class _Run:
    """One running program: feeds stdin, drains stdout and stderr without blocking."""

    def __init__(
        self, proc: subprocess.Popen[bytes], data: bytes, max_out: int, max_err: int
    ) -> None:
        import selectors

        self.proc = proc
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.stderr_dropped = 0
        self._max_out = max_out
        self._max_err = max_err
        self._pending = memoryview(data)
        self._sel = selectors.DefaultSelector()
        for stream, event in (
            (proc.stdin, selectors.EVENT_WRITE),
            (proc.stdout, selectors.EVENT_READ),
            (proc.stderr, selectors.EVENT_READ),
        ):
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
            self._sel.register(stream.fileno(), event)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._fd_in = proc.stdin.fileno()
        self._fd_out = proc.stdout.fileno()
        if not data:
            self._close_stdin()

    def running(self) -> bool:
        return self.proc.poll() is None

    def pump(self, ctx: Context, deadline: float) -> str | None:
        """Move bytes until stdout and stderr close; a reason to stop, or None.

        Once the program itself exited, what it left running in the background may hold
        the pipes open: drain for `LINGER_SECONDS` more, then stop (they are killed).
        """
        linger_until: float | None = None
        while self._sel.get_map():
            if ctx.cancelled:
                return "cancelled"
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return "deadline"
            if linger_until is None and self.proc.poll() is not None:
                linger_until = now + LINGER_SECONDS
            if linger_until is not None:
                if now >= linger_until:
                    return None
                left = min(left, linger_until - now)
            for key, _ in self._sel.select(min(POLL_SECONDS, left)):
                fd = int(key.fd)
                if fd == self._fd_in:
                    self._write_stdin()
                elif not self._read(fd):
                    return "too_large"
        return None

    def wait(self, ctx: Context, deadline: float) -> str | None:
        """Wait for the program to exit (its pipes are already closed)."""
        import subprocess

        while True:
            if ctx.cancelled:
                return "cancelled"
            left = deadline - time.monotonic()
            if left <= 0:
                return "deadline"
            try:
                self.proc.wait(min(POLL_SECONDS, left))
                return None
            except subprocess.TimeoutExpired:
                continue

    def _write_stdin(self) -> None:
        try:
            written = os.write(self._fd_in, self._pending[:PIPE_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the program closed its stdin: it does not want the rest
            self._close_stdin()
            return
        self._pending = self._pending[written:]
        if not self._pending:
            self._close_stdin()

    def _close_stdin(self) -> None:
        assert self.proc.stdin is not None
        if self._fd_in in self._sel.get_map():
            self._sel.unregister(self._fd_in)
        self.proc.stdin.close()

    def _read(self, fd: int) -> bool:
        """Read what is there; False when stdout broke its bound."""
        try:
            chunk = os.read(fd, PIPE_CHUNK)
        except BlockingIOError:
            return True
        if not chunk:
            self._sel.unregister(fd)
            return True
        if fd == self._fd_out:
            self.stdout += chunk
            return len(self.stdout) <= self._max_out
        keep = max(0, self._max_err - len(self.stderr))
        self.stderr += chunk[:keep]
        self.stderr_dropped += len(chunk) - min(keep, len(chunk))
        return True

    def close(self) -> None:
        self._sel.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def forward_stderr(self, name: str) -> None:
        """The program's kept stderr goes to the worker's stderr (diagnostics only)."""
        if not self.stderr and not self.stderr_dropped:
            return
        note = f"\n[{name}: {self.stderr_dropped} more stderr bytes dropped]\n"
        with contextlib.suppress(OSError):
            os.write(2, bytes(self.stderr) + (note.encode() if self.stderr_dropped else b""))


class _KillOnAbort:
    """The abort hook of one call, registered before its program is spawned.

    The worker may die (``ctx.on_abort``) while ``Popen`` runs, when the program may
    already have started children in its group but its pid has not reached the adapter.
    The hook then waits (at most `SPAWN_WAIT_SECONDS`) for the spawn to end and kills the
    group it made.
    """

    def __init__(self) -> None:
        import threading

        self._spawned = threading.Event()
        self._pgid: int | None = None

    def started(self, proc: subprocess.Popen[bytes] | None) -> None:
        """The spawn ended, with the program (its pid is its group's id) or without."""
        self._pgid = proc.pid if proc is not None else None
        self._spawned.set()

    def __call__(self) -> None:
        import signal

        if not self._spawned.wait(SPAWN_WAIT_SECONDS):
            with contextlib.suppress(OSError):
                os.write(2, b"worker_runtime: a command still starting was not killed\n")
        elif self._pgid is not None:
            _signal_group(self._pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the group, give it ``grace`` seconds, SIGKILL the group, reap the leader,
    and return only once no member of the group is left running."""
    import signal
    import subprocess

    if grace > 0:
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # also members that outlived their leader
    except (ProcessLookupError, PermissionError):
        proc.wait()
        return  # the group is already empty
    proc.wait()
    end = time.monotonic() + GROUP_EXIT_SECONDS
    while _group_running(proc.pid):
        if time.monotonic() > end:
            os.write(2, f"worker_runtime: process group {proc.pid} outlived SIGKILL\n".encode())
            return
        time.sleep(0.002)


def _group_running(pgid: int) -> bool:
    """True while a process of group ``pgid`` is not yet dead (zombies count as dead).

    SIGKILL takes effect asynchronously; members reparented away from us cannot be
    waited for, so /proc is the only place to see that they are gone.
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state, _ppid, group = stat[stat.rindex(b")") + 2 :].split(maxsplit=3)[:3]
        if int(group) == pgid and state not in (b"Z", b"X"):
            return True
    return False
