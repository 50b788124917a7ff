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
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4

_NAMES = "HUP INT QUIT TERM USR1 USR2 PIPE ALRM TSTP TTIN TTOU VTALRM PROF XCPU XFSZ"
#: Signals the bridge ignores (the child gets their defaults back).
IGNORED = tuple(getattr(signal, f"SIG{n}") for n in _NAMES.split() if hasattr(signal, f"SIG{n}"))


def _prctl(option: int, arg: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, arg, 0, 0, 0))


def guard_self() -> None:
    """Make the bridge non-dumpable and deaf to catchable signals; raises if the kernel
    refuses (the bridge must not run unprotected)."""
    if _prctl(PR_SET_DUMPABLE, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)


def _child_setup() -> None:
    """In the child, before exec: default signals, die with the bridge, die first."""
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_DFL)
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def spawn_server(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start the server with pipes on its stdin, stdout and stderr (non-blocking on our
    side), in its own session, closing every other fd."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        preexec_fn=_child_setup,  # the bridge is single-threaded: fork is safe
        bufsize=0,
    )
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        assert stream is not None
        os.set_blocking(stream.fileno(), False)
    return proc


def kill_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the server's whole process group and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, subprocess.TimeoutExpired):
        proc.wait(2.0)
