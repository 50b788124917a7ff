"""The MCP server as the bridge's child, and the bridge kept out of the child's reach.

Both run as the same uid in one sandbox, so what the kernel would let the server do to
the bridge is closed here:

- memory and descriptors: the bridge is made non-dumpable (``PR_SET_DUMPABLE 0``) before
  anything else, so ``/proc/<bridge>/mem``, ``/fd``, ``/environ`` and ``ptrace`` are
  refused to a same-uid process without ``CAP_SYS_PTRACE`` (the sandbox has no
  capabilities; seccomp also denies ``ptrace`` and ``process_vm_*``);
- the session key: the server is started *before* the bootstrap is read, so the key was
  never in the memory it was forked from, and the protocol fds are close-on-exec;
- signals: the server gets a session and process group of its own (a ``kill(0, ...)``
  does not reach the bridge), and the bridge ignores every catchable signal. What is left,
  ``SIGKILL``/``SIGSTOP`` of the bridge's pid, can only end the session: the host sees the
  pipe close or the deadline pass, kills the sandbox and reports the call indeterminate;
  it can never make the host accept a forged answer;
- memory pressure: the server's ``oom_score_adj`` is 1000, so the kernel kills it first;
- pipes: the server sees only its own stdin, stdout and stderr, whose other ends only the
  bridge holds; everything on its stdout is judged by `McpClient` (a bad line is fatal).

The bridge's entry (`mcp_boot`) starts the server before anything else loads, so this
module imports only what the spawn needs: ``os``, ``_ctypes`` and ``_signal`` (the C
modules under ``ctypes`` and ``signal``: ``ctypes`` itself costs ~5 ms of the start idle
and tens under load, ``signal``'s enums ~10 ms), not ``subprocess`` (~40 ms under load).
The spawn is ``fork`` and ``exec`` with what `subprocess.Popen` would do for
``start_new_session=True, close_fds=True, restore_signals=True`` and a ``preexec_fn``.
"""

from __future__ import annotations

import _ctypes
import os
import time

TYPE_CHECKING = False  # typing's own costs an import; mypy reads any TYPE_CHECKING as true
if TYPE_CHECKING:
    import signal as _signal  # the same functions and constants, typed (`_signal` has no stub)
    from collections.abc import Sequence

    _SimpleInt = _ctypes._SimpleCData[int]
else:
    import _signal

    _SimpleInt = _ctypes._SimpleCData

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4

_NAMES = "HUP INT QUIT TERM USR1 USR2 PIPE ALRM TSTP TTIN TTOU VTALRM PROF XCPU XFSZ"
#: Signals the bridge ignores (the child gets their defaults back).
IGNORED = tuple(getattr(_signal, f"SIG{n}") for n in _NAMES.split() if hasattr(_signal, f"SIG{n}"))
#: The child's exit status when its set-up failed before ``exec``.
EXIT_SETUP = 127


class _CInt(_SimpleInt):
    _type_ = "i"


class _LibcFunction(_ctypes.CFuncPtr):
    """A libc function returning an int, with its errno kept: what
    ``ctypes.CDLL(None, use_errno=True).NAME`` is, without importing ``ctypes``."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


#: prctl, looked up once: the child calls it between fork and exec, where a ``dlopen``
#: could wait forever on a lock another thread (the network forwarder's) held at the fork.
# None: the program and its libraries, libc among them (the stub wants a path)
_LIBC = _ctypes.dlopen(None, os.RTLD_LOCAL)  # type: ignore[arg-type]
_PRCTL = _LibcFunction(_ctypes.dlsym(_LIBC, "prctl"))


def _prctl(option: int, arg: int) -> int:
    return int(_PRCTL(option, arg, 0, 0, 0))


def _errno() -> int:
    return int(_ctypes.get_errno())


#: Set by ``scripts/bench_mcp.py --hops``: the bridge writes when it reaches each step.
_HOPS = os.environ.get("SANDVISOR_MCP_HOPS") == "1"


def hop(name: str) -> None:
    """``hop NAME UNIX-TIME`` on stderr, if asked for (the bench's hop-by-hop start)."""
    if _HOPS:
        os.write(2, f"hop {name} {time.time():.6f}\n".encode())


class StartError(Exception):
    """The server could not be started; the message is the one line to print."""


def start_server(argv: Sequence[str]) -> Server:
    """Guard the bridge, then start the server (after the network forwarder, where the
    sandbox has one: the server's way out, which its environment names, must listen first)."""
    try:
        if os.environ.get("SANDVISOR_NET_SOCKET"):
            from .. import netforward

            netforward.start()
        guard_self()
    except OSError as exc:
        raise StartError(f"cannot start: {exc}") from None
    try:
        return spawn_server(argv)
    except OSError as exc:
        raise StartError(f"cannot start {argv[0]!r}: {exc}") from None


def guard_self() -> None:
    """Make the bridge non-dumpable and deaf to catchable signals; raises if the kernel
    refuses (the bridge must not run unprotected)."""
    if _prctl(PR_SET_DUMPABLE, 0) != 0:
        raise OSError(_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    for sig in IGNORED:
        _signal.signal(sig, _signal.SIG_IGN)


class Server:
    """The running server: its pid (and process group) and the bridge's ends of its
    stdin, stdout and stderr, non-blocking."""

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None

    def wait(self, timeout: float) -> int | None:
        """Its exit status (negative: the signal that ended it), or None if it still runs
        after ``timeout`` seconds."""
        until = time.monotonic() + timeout
        while self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already: its status is lost
                self.returncode = -int(_signal.SIGKILL)
                break
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() >= until:
                return None
            time.sleep(0.005)
        return self.returncode


def spawn_server(argv: Sequence[str]) -> Server:
    """Start the server with pipes on its stdin, stdout and stderr (non-blocking on our
    side), in its own session, every other fd closed; raises `OSError` if it cannot run."""
    argv = list(argv)
    child_in, stdin = os.pipe()  # os.pipe's fds are close-on-exec (PEP 446)
    stdout, child_out = os.pipe()
    stderr, child_err = os.pipe()
    failed_r, failed_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()  # the bridge is single-threaded: fork is safe
    if pid == 0:
        _exec_child(argv, (child_in, child_out, child_err), failed_w, parent)
    for fd in (child_in, child_out, child_err, failed_w):
        os.close(fd)
    failure = b""
    while chunk := os.read(failed_r, 64):  # EOF: the exec closed it, the server runs
        failure += chunk
    os.close(failed_r)
    if failure:
        os.waitpid(pid, 0)
        for fd in (stdin, stdout, stderr):
            os.close(fd)
        code, _, step = failure.decode(errors="replace").partition(":")
        errno = int(code) if code.isdigit() else 0
        raise OSError(errno, f"{os.strerror(errno) if errno else 'failed'} ({step})")
    for fd in (stdin, stdout, stderr):
        os.set_blocking(fd, False)
    return Server(pid, stdin, stdout, stderr)


def _exec_child(argv: list[str], stdio: tuple[int, int, int], failed: int, parent: int) -> None:
    """In the child: default signals, its own session, die with the bridge, die first
    under memory pressure, the three pipes and nothing else, then ``exec``. A failure is
    written as ``ERRNO:STEP`` on ``failed`` (close-on-exec: silence means it ran)."""
    step = "setsid"
    try:
        os.setsid()
        for sig in IGNORED:  # an ignored signal stays ignored across exec
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, ())  # and a blocked one stays blocked
        step = "prctl(PR_SET_PDEATHSIG)"
        if _prctl(PR_SET_PDEATHSIG, int(_signal.SIGKILL)) != 0:
            raise OSError(_errno(), step)
        if os.getppid() != parent:  # the bridge died before the prctl
            os._exit(EXIT_SETUP)
        try:
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")
            os.close(fd)
        except OSError:
            pass
        step = "dup2"
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)  # the copy on 0, 1, 2 is inheritable
        for name in os.listdir("/proc/self/fd"):  # close_fds: nothing else reaches the server
            if int(name) > 2 and int(name) != failed:
                try:  # noqa: SIM105 (contextlib costs an import before the spawn)
                    os.close(int(name))
                except OSError:
                    pass
        step = f"exec {argv[0]}"
        os.execvp(argv[0], argv)
    except BaseException as exc:
        errno = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        os.write(failed, f"{errno}:{step}".encode())
    finally:
        os._exit(EXIT_SETUP)


def kill_server(proc: Server) -> None:
    """SIGKILL the server's whole process group and reap it."""
    try:  # noqa: SIM105 (contextlib costs an import before the spawn)
        os.killpg(proc.pid, _signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(2.0)
