"""The host side of a fork server: start one, have it fork sandboxes, stop it.

A fork server (`sandbox.forkserver_main`) is a small single-threaded interpreter that
forks each sandbox's first process with ``clone3(CLONE_PARENT | CLONE_INTO_CGROUP)``.
Compared with forking the host itself: the fork is cheap (its ~10 MB, not the host's
memory), the child is born in its cgroup v2 directory (no ``cgroup.procs`` write, which
waits for an RCU grace period), and the exec leaves a small address space behind.

A `ForkServer` belongs to the thread that creates it. That thread starts the server
process, so the server dies with it (``PR_SET_PDEATHSIG``); and every sandbox the server
forks is that thread's own child (``CLONE_PARENT``): the host reaps it, waits on it, gets
its rusage, and it dies with that thread exactly as if the thread had forked it itself.
So a sandbox keeps the lifetime of the thread that asked for it:

- `of_this_thread` is the calling thread's own server, started on its first sandbox and
  kept for the next ones (like the lifeline); stopped when that thread ends, or by
  `stop_idle` once the process has no sandbox left;
- a `sandbox.spawn.Spawner` owns one for its thread.

`ForkServer.spawn` returns a `SandboxProcess` once bwrap runs (its exec succeeded), or
raises `LaunchError` with the child's own words when its set-up or the exec failed.
"""

from __future__ import annotations

import array
import contextlib
import errno
import marshal
import os
import socket
import subprocess
import sys
import threading
import weakref
from typing import IO, TYPE_CHECKING, Any

from .errors import LaunchError
from .fdwait import wait_readable
from .forkserver_main import MAX_FDS, MAX_MESSAGE, VERSION

if TYPE_CHECKING:
    from .launch import LaunchPlan

Stdio = int | IO[Any] | None

#: The directory that holds the `sandbox` package: the server imports it from there.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from sandbox.forkserver_main import main; main(sys.argv[2:])"
)
START_TIMEOUT = 30.0  # seconds for a fresh interpreter to say it is ready
STOP_TIMEOUT = 2.0


class SandboxProcess:
    """The started bwrap, described as `subprocess.Popen` would (what `Sandbox` and its
    users read: ``pid``, ``args``, the pipe ends, ``returncode``). The `Sandbox` reaps it."""

    def __init__(
        self,
        args: list[str],
        pid: int,
        stdin: IO[bytes] | None,
        stdout: IO[bytes] | None,
        stderr: IO[bytes] | None,
    ) -> None:
        self.args = args
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None


class ForkServer:
    """One fork server process, owned by the thread that created this object.

    `spawn` starts the server on first use; `stop` ends it (a later `spawn` starts a new
    one); `close` ends it for good. Only the owning thread may spawn (the server's
    children are that thread's); any thread may stop it."""

    def __init__(self) -> None:
        self.owner_pid = os.getpid()
        self.owner_thread = threading.get_ident()
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The server process, while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server now (from the owning thread), if it is not running."""
        with self._lock:
            self._check_caller()
            if self._sock is None:
                self._start()

    def spawn(
        self,
        plan: LaunchPlan,
        *,
        stdin: Stdio = subprocess.DEVNULL,
        stdout: Stdio = None,
        stderr: Stdio = None,
    ) -> SandboxProcess:
        """Fork ``plan`` (already claimed by the caller, who aborts it on failure)."""
        with self._lock:
            self._check_caller()
            if self._sock is None:
                self._start()
            return self._fork(plan, _StdioFds(stdin, stdout, stderr))

    def stop(self, *, block: bool = True) -> bool:
        """End the server process (it is started again on the next `spawn`); False if
        ``block`` is False and a spawn holds it right now."""
        if not self._lock.acquire(blocking=block):
            return False
        try:
            self._stop()
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        """End the server for good."""
        with self._lock:
            self._closed = True
            self._stop()

    def __del__(self) -> None:
        # At the end of the owning thread (a thread-local server) or of the owner. In a
        # forked child (which finalises other threads' locals too) it is not ours: only
        # our copy of the socket goes, and the server lives on for its real owner.
        try:
            if os.getpid() != self.owner_pid:
                if self._sock is not None:
                    self._sock.close()
                return
            self.stop()
        except Exception:  # interpreter shutdown: the server dies with us anyway
            pass

    # --- inside the lock ---------------------------------------------------------------

    def _check_caller(self) -> None:
        if self._closed:
            raise LaunchError("the fork server is closed")
        if os.getpid() != self.owner_pid or threading.get_ident() != self.owner_thread:
            raise LaunchError("a fork server forks only for the thread that created it")

    def _start(self) -> None:
        # subprocess, not os.posix_spawn: glibc's posix_spawn leaves its own signals (32,
        # 33) ignored in the child, and an ignored signal stays ignored in every sandbox.
        # Popen's child (vfork, close_fds) keeps none of the host's fds but the socket.
        if not sys.executable:
            raise LaunchError("cannot start a fork server: no Python executable known")
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        argv = [sys.executable, "-I", "-S", "-B", "-c", BOOTSTRAP, ROOT]
        argv += [str(server_end.fileno()), str(os.getpid())]
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err_write,
                pass_fds=(server_end.fileno(),),
                env={},
            )
        except BaseException:
            host_end.close()
            os.close(err_read)
            raise
        finally:
            server_end.close()
            os.close(err_write)
        try:
            ready = wait_readable(host_end.fileno(), START_TIMEOUT) and host_end.recv(16)
            if ready != b"ready":
                raise LaunchError(f"the fork server did not start: {_drain(err_read)!r}")
        except BaseException:
            host_end.close()
            _reap(process)
            raise
        finally:
            os.close(err_read)
        self._process, self._sock = process, host_end

    def _stop(self) -> None:
        sock, process = self._sock, self._process
        self._sock = self._process = None
        if sock is not None:
            sock.close()  # the server reads EOF and exits
        if process is not None:
            _reap(process)

    def _fork(self, plan: LaunchPlan, stdio: _StdioFds) -> SandboxProcess:
        assert self._sock is not None
        child = plan.preexec_fn
        sent: list[int] = []

        def ref(fd: int) -> int:
            sent.append(fd)
            return len(sent) - 1

        report_read, report_write = os.pipe2(os.O_CLOEXEC)
        try:
            fd_map = tuple((target, ref(fd)) for target, fd in (*stdio.child, *child.fd_map))
            cgroup = plan.cgroup
            birth = cgroup.birth if cgroup is not None else None
            joins = cgroup.v1_join_fds if cgroup is not None and birth else child.cgroup_fds
            request = (
                VERSION,
                plan.executable,
                tuple(plan.argv),
                fd_map,
                tuple(ref(fd) for fd in joins),
                (ref(birth[0]), ref(birth[1])) if birth else None,
                child.rlimits,
                tuple((path, ref(fd), is_dir) for path, fd, is_dir in child.trees),
                child.uid,
                child.parent_pid,
                ref(report_write),
            )
            data = marshal.dumps(request)
            if len(data) > MAX_MESSAGE or len(sent) > MAX_FDS:
                raise LaunchError("the command or its fds are too large for one launch")
            self._send(data, sent)
            os.close(report_write)
            report_write = -1
            try:
                answer = self._sock.recv(65536)
            except OSError:
                answer = b""
            if not answer:  # it took the request and died: a child may exist, no retry
                self._stop()
                raise LaunchError("the fork server died while forking")
            kind, value = marshal.loads(answer)
            if kind != "ok" or not isinstance(value, int):
                raise LaunchError(f"the fork server could not fork the sandbox: {value}")
            failure = _drain(report_read)  # EOF: bwrap runs (or the child died)
            if failure:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(value, 0)  # it exits at once
                stage, text = failure[:1], failure[1:].decode(errors="replace")
                if stage == b"E":
                    raise LaunchError(f"cannot start bwrap: {text}")
                raise LaunchError(f"sandbox set-up failed in the child: {text}")
            return SandboxProcess(plan.argv, value, *stdio.taken())
        finally:
            os.close(report_read)
            if report_write >= 0:
                os.close(report_write)
            stdio.close()

    def _send(self, data: bytes, fds: list[int]) -> None:
        """Hand a request over; a server found dead (it never got it) is replaced once."""
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        for attempt in (1, 2):
            assert self._sock is not None
            try:
                self._sock.sendmsg([data], ancillary, socket.MSG_NOSIGNAL)
                return
            except OSError as exc:
                if exc.errno == errno.EMSGSIZE:  # the socket buffer is capped (wmem_max)
                    raise LaunchError("the command is too large for one launch") from None
                self._stop()
                if attempt == 2 or exc.errno not in (errno.EPIPE, errno.ECONNRESET):
                    raise LaunchError(f"cannot reach the fork server: {exc}") from None
                self._start()


class _StdioFds:
    """The child's fds 0-2 from `subprocess.Popen`-style arguments, and the host's ends of
    the pipes made for ``PIPE`` (file objects, as Popen gives)."""

    def __init__(self, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> None:
        self._opened: list[int] = []  # closed once the child has its copies
        self._parents: list[IO[bytes] | None] = [None, None, None]
        inp, out = self._resolve(0, stdin), self._resolve(1, stdout)
        err = out if stderr == subprocess.STDOUT else self._resolve(2, stderr)
        self.child = ((0, inp), (1, out), (2, err))

    def _resolve(self, number: int, spec: Stdio) -> int:
        if spec is None:
            if _is_open(number):
                return number
            spec = subprocess.DEVNULL
        if spec == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            self._opened.append(fd)
            return fd
        if spec == subprocess.PIPE:
            read, write = os.pipe2(os.O_CLOEXEC)
            mine, theirs = (write, read) if number == 0 else (read, write)
            self._opened.append(theirs)
            self._parents[number] = open(mine, "wb" if number == 0 else "rb")  # noqa: SIM115
            return theirs
        if isinstance(spec, int):
            if spec < 0:
                raise ValueError(f"unsupported stdio value {spec}")
            return spec
        return spec.fileno()

    def taken(self) -> tuple[IO[bytes] | None, IO[bytes] | None, IO[bytes] | None]:
        """The host's pipe ends, now the caller's to close."""
        stdin, stdout, stderr = self._parents
        self._parents = [None, None, None]
        return stdin, stdout, stderr

    def close(self) -> None:
        """Close the child's copies, and any host end not taken (a failed launch)."""
        for fd in self._opened:
            os.close(fd)
        self._opened.clear()
        for stream in self.taken():
            if stream is not None:
                stream.close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _drain(fd: int) -> bytes:
    """Everything until EOF (blocking)."""
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the server to exit (it was told to, or its start failed); SIGKILL it if it
    does not go within `STOP_TIMEOUT`."""
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class _ThreadServers(threading.local):
    server: ForkServer | None = None


_per_thread = _ThreadServers()
_all: weakref.WeakSet[ForkServer] = weakref.WeakSet()
_all_lock = threading.Lock()


def of_this_thread() -> ForkServer:
    """The calling thread's own fork server (not yet started until its first spawn)."""
    server = _per_thread.server
    if server is None or server.owner_pid != os.getpid():
        server = _per_thread.server = ForkServer()
        with _all_lock:
            _all.add(server)
    return server


def stop_idle() -> None:
    """Stop every thread's fork server that is not forking right now (each restarts on
    its thread's next sandbox). For when the process has no sandbox left."""
    with _all_lock:
        servers = list(_all)
    for server in servers:
        if server.owner_pid == os.getpid():
            server.stop(block=False)
