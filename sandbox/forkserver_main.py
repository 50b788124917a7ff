"""The fork server's program: a small, single-threaded process that forks sandboxes.

`sandbox.forkserver` starts it (``python -I -S -B -c BOOTSTRAP ROOT SOCKET_FD HOST_PID``)
from the host thread that owns it. Why a separate process:

- a fork costs in proportion to the forking process's memory: about 0.8 ms from this
  ~10 MB interpreter, 1.5 to 4 ms from a host with its libraries loaded;
- only a single-threaded process may call ``clone3`` itself, which does two things
  ``fork()`` cannot: ``CLONE_INTO_CGROUP`` (the child is born in its cgroup v2 directory
  instead of moving there through ``cgroup.procs``, which waits for an RCU grace period:
  8-10 ms here) and ``CLONE_PARENT`` (the child is the host thread's child, exactly as if
  that thread had forked it: the host reaps it, gets its rusage, and ``PR_SET_PDEATHSIG``
  fires when that thread ends).

The server dies with the thread that started it (``PR_SET_PDEATHSIG``, armed and then
checked against the host's pid) and exits when the host closes its end of the socket. It
ignores terminal signals (a Ctrl-C is the host's to handle); its children restore them.

The wire: a ``SOCK_SEQPACKET`` socketpair private to the host. A request is one message,
``marshal`` of `Request`'s fields in order, with the fds it names as ``SCM_RIGHTS`` (the
numbers in the request index that list); the answer is ``marshal`` of ``("ok", pid)`` or
``("error", text)``. The child reports a failure before exec on the request's report pipe
(``b"S"`` + text for its set-up, ``b"E"`` + text for the exec) and exits 127; a
successful exec closes the pipe. ``marshal``, not msgspec: both ends are the same host
program (no trust boundary is crossed), and the server must import nothing third-party.

Only ``os``, ``marshal``, ``_socket``, ``_signal`` and the lean `sandbox.childsetup` and
`sandbox.linux` are imported: each module held here makes every fork dearer.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # builtin; `signal` would load enum
import _socket
import errno
import marshal
import os

from . import linux
from .childsetup import SIGKILL, FdMap, Limits, Trees, describe, set_up

#: Bumped when the request's shape changes (the host and server come from one checkout,
#: but a stale server must fail loudly rather than misread a request).
VERSION = 1
MAX_MESSAGE = 1 << 20
MAX_FDS = 253  # SCM_MAX_FD
MAX_FD = 1 << 30  # past any fd number (closerange uses close_range(2))
SOCKET = 3  # the server's socket to its host
#: Fds from SOCKET + 1 up to here are /dev/null plugs; received fds come above them. A
#: sandbox's fds are 0-2, the caller's (at most 63) and bwrap's six after those.
PLUGGED = 128
#: Set to SIG_IGN here (terminal signals) or by Python itself (SIGPIPE, SIGXFSZ); an
#: ignored signal stays ignored across exec, so the child restores the default first.
IGNORED = (1, 2, 3, 15)  # SIGHUP, SIGINT, SIGQUIT, SIGTERM
RESTORED = (*IGNORED, 13, 25)  # and SIGPIPE, SIGXFSZ (x86_64 and aarch64 numbers)


class RequestError(ValueError):
    """A request that does not have the agreed shape."""


class Request:
    """One sandbox to fork, from the decoded fields and the received fds (numbered
    `PLUGGED` and up: above every child fd number, so remapping never overwrites one
    that is still to be used)."""

    __slots__ = (
        "argv",
        "birth",
        "executable",
        "fd_map",
        "join_fds",
        "parent_pid",
        "report_fd",
        "rlimits",
        "trees",
        "uid",
    )

    def __init__(self, fields: object, fds: list[int]) -> None:
        if not isinstance(fields, tuple) or len(fields) != 11 or fields[0] != VERSION:
            raise RequestError("not a fork request of this version")
        _, executable, argv, fd_map, joins, birth, rlimits, trees, uid, parent, report = fields
        pairs = [(_int(t), _int(i)) for t, i in _rows(fd_map, 2)]
        if any(not 0 <= target < PLUGGED for target, _ in pairs):
            raise RequestError(f"child fd numbers must be below {PLUGGED}")
        if any(fd < PLUGGED for fd in fds):
            raise RequestError("a received fd sits among the child fd numbers")

        def fd(index: object) -> int:
            if not isinstance(index, int) or not 0 <= index < len(fds):
                raise RequestError(f"fd index {index!r} out of range")
            return fds[index]

        self.executable = _text(executable)
        self.argv = tuple(_text(a) for a in _row(argv))
        if not self.argv:
            raise RequestError("empty argv")
        self.fd_map: FdMap = tuple((target, fd(i)) for target, i in pairs)
        self.join_fds = tuple(fd(i) for i in _row(joins))
        self.birth: tuple[int, int] | None = None
        if birth is not None:
            directory, procs = _rows((birth,), 2)[0]
            self.birth = fd(directory), fd(procs)
        self.rlimits: Limits = tuple((_int(r), _int(s), _int(h)) for r, s, h in _rows(rlimits, 3))
        self.trees: Trees = tuple((_text(p), fd(i), d is True) for p, i, d in _rows(trees, 3))
        self.uid = _int(uid)
        self.parent_pid = _int(parent)
        self.report_fd = fd(report)


def _row(value: object) -> tuple[object, ...]:
    if not isinstance(value, tuple):
        raise RequestError(f"expected a tuple, got {type(value).__name__}")
    return value


def _rows(value: object, width: int) -> list[tuple[object, ...]]:
    rows = [_row(item) for item in _row(value)]
    if any(len(row) != width for row in rows):
        raise RequestError(f"expected tuples of {width}")
    return rows


def _text(value: object) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise RequestError("expected a string without NUL")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RequestError("expected an integer")
    return value


def fork_sandbox(request: Request) -> int:
    """Clone the sandbox's first process as the host thread's child; its pid."""
    cgroup_dir = request.birth[0] if request.birth else None
    joins = request.join_fds
    try:
        pid = linux.clone_parent(cgroup_dir)
    except OSError as exc:
        if cgroup_dir is None or exc.errno not in (errno.EINVAL, errno.E2BIG):
            raise
        # a kernel without CLONE_INTO_CGROUP (< 5.7): the child joins by writing
        assert request.birth is not None
        joins = (*joins, request.birth[1])
        pid = linux.clone_parent(None)
    if pid == 0:
        _become_sandbox(request, joins)  # never returns
    return pid


def _become_sandbox(request: Request, joins: tuple[int, ...]) -> None:
    report = request.report_fd
    stage = b"S"
    try:
        for signum in RESTORED:
            _signal.signal(signum, _signal.SIG_DFL)
        set_up(request.fd_map, joins, request.rlimits, request.trees, request.uid,
               request.parent_pid)  # fmt: skip
        stage = b"E"
        os.execve(request.executable, request.argv, {})
    except BaseException as exc:
        try:  # noqa: SIM105 (contextlib is one more module in the server)
            os.write(report, stage + describe(exc).encode(errors="replace"))
        except BaseException:
            pass
    finally:
        os._exit(127)


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], "little", signed=True)
                    for i in range(0, usable, 4)]  # fmt: skip
    return fds


def handle(data: memoryview, flags: int, fds: list[int]) -> tuple[str, int | str]:
    """One request to its answer; the received fds are closed whatever happens (all of
    them: every fd from `PLUGGED` up is a received one)."""
    try:
        if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
            raise RequestError("request or its fds truncated")
        return "ok", fork_sandbox(Request(marshal.loads(data), fds))
    except Exception as exc:
        return "error", describe(exc)
    finally:
        os.closerange(PLUGGED, MAX_FD)


def serve(sock_fd: int, host_pid: int) -> None:
    """Answer requests until the host closes the socket."""
    # The host gave fds 0-2 and the socket (and closed everything else: close_fds); no
    # other fd may ever reach a sandbox: all but 0-2 are close-on-exec from here on.
    os.closerange(3, sock_fd)
    os.closerange(sock_fd + 1, MAX_FD)
    if sock_fd != SOCKET:
        os.dup2(sock_fd, SOCKET, inheritable=False)
        os.close(sock_fd)
    os.set_inheritable(SOCKET, False)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    os.dup2(null, 2)  # the host read start-up errors there; from now on, nothing
    for fd in range(SOCKET + 1, PLUGGED):  # received fds then land at PLUGGED and up
        if fd != null:
            os.dup2(null, fd, inheritable=False)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())  # whatever the host thread blocked
    for signum in IGNORED:
        _signal.signal(signum, _signal.SIG_IGN)
    linux.set_parent_death_signal(SIGKILL)
    if os.getppid() != host_pid:
        return  # the thread that started us is gone already
    sock = _socket.socket(fileno=SOCKET)
    sock.send(b"ready")
    buffer = bytearray(MAX_MESSAGE)  # reused: pages are touched only as far as used
    view = memoryview(buffer)
    ancillary_size = _socket.CMSG_SPACE(MAX_FDS * 4)
    while True:
        size, ancillary, flags, _ = sock.recvmsg_into(
            [buffer], ancillary_size, _socket.MSG_CMSG_CLOEXEC
        )
        fds = _received_fds(ancillary)
        if not size:
            return
        sock.send(marshal.dumps(handle(view[:size], flags, fds)))


def main(argv: list[str]) -> None:
    serve(int(argv[0]), int(argv[1]))
