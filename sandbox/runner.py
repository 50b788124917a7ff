"""`run`: one program in one sandbox, synchronously, with a wall deadline and byte caps.

The harness of `sandvisor exec` and of the escape suite. All pipes are served from one
``poll`` loop so the host never blocks on a child that floods one stream, never reads
stdin, or stalls; output beyond a cap is read and dropped (counted), never buffered, so a
flood costs the host nothing. The deadline is on the monotonic clock; when it passes the
whole sandbox is killed and the end is classified as a timeout.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cgroups import CgroupLayout
from .handle import Sandbox

if TYPE_CHECKING:
    from .handle import Process
    from .netproxy.events import NetEvent
from .command import Command
from .launch import prepare_launch, warm_up
from .policy import MiB, SandboxPolicy
from .spawn import spawn
from .termination import Termination

#: After bwrap exits, how long the pipes may take to reach EOF before we stop reading.
DRAIN_GRACE = 0.5
CHUNK = 65536

Sink = Callable[[bytes], None]


@dataclass(frozen=True)
class RunResult:
    """What a sandboxed run produced, and how it ended."""

    termination: Termination
    stdout: bytes
    stderr: bytes
    stdout_dropped: int
    stderr_dropped: int
    duration: float

    @property
    def reason(self) -> str:
        return self.termination.reason

    @property
    def exit_status(self) -> int:
        """The shell-style status: the program's, 124 on timeout, 128+N on signal N."""
        return self.termination.exit_status

    @property
    def stdout_truncated(self) -> bool:
        return self.stdout_dropped > 0

    @property
    def stderr_truncated(self) -> bool:
        return self.stderr_dropped > 0


class _Capped:
    """One output stream: keeps the first ``cap`` bytes (or hands them to a sink)."""

    def __init__(self, cap: int, sink: Sink | None) -> None:
        self.cap = cap
        self.sink = sink
        self.kept: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = max(0, self.cap - self.size)
        keep, drop = data[:room], data[room:]
        if keep:
            self.size += len(keep)
            if self.sink is not None:
                self.sink(keep)
            else:
                self.kept.append(keep)
        self.dropped += len(drop)


def run(
    policy: SandboxPolicy,
    command: Sequence[str] | Command,
    *,
    timeout: float | None,
    stdout_cap: int = 1 * MiB,
    stderr_cap: int = 1 * MiB,
    input: bytes | None = None,
    stdin_fd: int | None = None,
    on_stdout: Sink | None = None,
    on_stderr: Sink | None = None,
    fds: Mapping[int, int] | None = None,
    layout: CgroupLayout | None = None,
    on_network: Callable[[NetEvent], None] | None = None,
) -> RunResult:
    """Run ``command`` in a fresh sandbox and tear it down; nothing of it survives.

    With ``on_stdout``/``on_stderr`` the kept bytes are passed on as they arrive instead
    of being collected. ``stdin_fd`` hands the program an fd of ours as its stdin (instead
    of ``input`` or /dev/null). ``fds`` maps extra child fds (3 and up) to parent fds.
    ``layout``: the cgroup hierarchies to use (default: what this machine offers).
    A policy with a network allowlist gets a proxy of its own for the run, on a thread of
    its own; ``on_network`` hears each connection's `NetEvent` (from that thread).
    """
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    if input is not None and stdin_fd is not None:
        raise ValueError("give input or stdin_fd, not both")
    cmd = command if isinstance(command, Command) else Command(tuple(command))
    started = time.monotonic()
    stdin: int = subprocess.DEVNULL
    if input is not None:
        stdin = subprocess.PIPE
    elif stdin_fd is not None:
        stdin = stdin_fd
    with contextlib.ExitStack() as proxy:
        network = None
        if policy.allowlist is not None:
            from .netproxy.thread import ProxyThread

            network = proxy.enter_context(ProxyThread(policy.allowlist, on_network)).directory
        plan = prepare_launch(policy, cmd, fds=fds, layout=layout, network=network)
        with spawn(plan, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as sandbox:
            warm_up()  # the next sandbox's cgroups, while bwrap sets this one up
            out = _Capped(stdout_cap, on_stdout)
            err = _Capped(stderr_cap, on_stderr)
            deadline = None if timeout is None else started + timeout
            timed_out = _pump(sandbox, input or b"", out, err, deadline)
            termination = sandbox.termination(timed_out=timed_out)
    return RunResult(
        termination=termination,
        stdout=b"".join(out.kept),
        stderr=b"".join(err.kept),
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
        duration=time.monotonic() - started,
    )


def _pump(
    sandbox: Sandbox, data: bytes, out: _Capped, err: _Capped, deadline: float | None
) -> bool:
    """Move bytes until both outputs close; True if the deadline killed the sandbox."""
    popen = sandbox.popen
    assert popen.stdout is not None and popen.stderr is not None
    readers = {popen.stdout.fileno(): out, popen.stderr.fileno(): err}
    writer = popen.stdin.fileno() if popen.stdin is not None else None
    for fd in [*readers, *([writer] if writer is not None else [])]:
        os.set_blocking(fd, False)
    poller = select.poll()
    for fd in readers:
        poller.register(fd, select.POLLIN)
    if writer is not None:
        poller.register(writer, select.POLLOUT)
    poller.register(sandbox.pidfd, select.POLLIN)
    timed_out = False
    exited_at: float | None = None
    view = memoryview(data)
    try:
        while readers:
            now = time.monotonic()
            if deadline is not None and now >= deadline and not timed_out:
                sandbox.kill("timeout")
                timed_out = True
            if exited_at is None and sandbox.poll() is not None:
                exited_at = now
                poller.unregister(sandbox.pidfd)
            if exited_at is not None and now - exited_at > DRAIN_GRACE:
                sandbox.kill("output still open after exit")
                break
            waits = [1000.0]
            if deadline is not None and not timed_out:
                waits.append((deadline - now) * 1000)
            if exited_at is not None:
                waits.append((exited_at + DRAIN_GRACE - now) * 1000)
            for fd, events in poller.poll(max(0, int(min(waits))) + 1):
                if fd in readers:
                    chunk = _read(fd)
                    if chunk:
                        readers[fd].add(chunk)
                    elif chunk is not None:  # EOF
                        poller.unregister(fd)
                        del readers[fd]
                elif fd == writer:
                    view = _write(writer, view)
                    if not view or events & (select.POLLERR | select.POLLHUP):
                        poller.unregister(writer)
                        _close_stdin(popen)
                        writer = None
    finally:
        if writer is not None:
            _close_stdin(popen)
    return timed_out


def _read(fd: int) -> bytes | None:
    try:
        return os.read(fd, CHUNK)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno == errno.EIO:
            return b""
        raise


def _write(fd: int, view: memoryview) -> memoryview:
    try:
        return view[os.write(fd, view[:CHUNK]) :]
    except BlockingIOError:
        return view
    except BrokenPipeError:
        return view[:0]


def _close_stdin(popen: Process) -> None:
    if popen.stdin is not None:
        with contextlib.suppress(OSError):
            popen.stdin.close()
