"""Running hostile Python in a real sandbox, and reading back what it saw.

The sandbox gets the host interpreter's prefix read-only (nothing else of /root) and runs
``python -S -c CODE``. `PRELUDE` gives the hostile code ``sc(name, *args)``: a raw
syscall through ctypes that returns 0 or the errno, so a test can assert exactly which
rule refused it. `run_json` expects the code to print one JSON document last. Also what
several test modules share: `sandvisor` (the command, as a user runs it) and the teardown
checks (`Watch`, `uid_processes`, `wait_for`, `started`, `open_fds`, `alive`), which
work for a root host's sandboxes (a fresh uid each) and a rootless one's (the host's uid).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import psutil

from sandbox.handle import Sandbox
from sandbox.launch import Command, prepare_launch
from sandbox.policy import Bind, SandboxPolicy
from sandbox.runner import RunResult, run
from sandbox.seccomp import native_arch
from sandbox.spawn import spawn

PREFIX = os.path.realpath(sys.base_prefix)
PYTHON = os.path.realpath(sys.executable)
ARCH = native_arch()
SYSCALLS = dict(ARCH.syscalls) if ARCH else {}
SYSCALLS.update(
    {"getpid": 39, "kill": 62, "openat": 257}
    if ARCH and ARCH.name == "x86_64"
    else {"getpid": 172, "kill": 129, "openat": 56}
)

PRELUDE = f"""
import ctypes, errno, json, os, signal, socket, sys
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NR = {SYSCALLS!r}
def sc(name, *args):
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(NR[name]), *conv)
    return 0 if r >= 0 else ctypes.get_errno()
def out(obj):
    sys.stdout.flush()
    print(json.dumps(obj))
"""


def py_policy(**changes: Any) -> SandboxPolicy:
    """The default policy plus the interpreter's prefix (read-only)."""
    binds = (Bind(PREFIX), *changes.pop("binds", ()))
    return SandboxPolicy(binds=binds, **changes)


def run_py(
    code: str, *, policy: SandboxPolicy | None = None, timeout: float = 30, **kw: Any
) -> RunResult:
    command = Command((PYTHON, "-S", "-c", PRELUDE + code))
    return run(policy or py_policy(), command, timeout=timeout, **kw)


def run_json(code: str, **kw: Any) -> Any:
    result = run_py(code, **kw)
    assert result.reason == "exited" and result.termination.exit_code == 0, (
        result.termination,
        result.stderr.decode(errors="replace")[-2000:],
    )
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


def start_py(code: str, *, policy: SandboxPolicy | None = None) -> Sandbox:
    """Start hostile Python in the background (stdout piped); use as a context manager."""
    plan = prepare_launch(policy or py_policy(), Command((PYTHON, "-S", "-c", PRELUDE + code)))
    return spawn(plan, stdout=subprocess.PIPE)


def read_line(sandbox: Sandbox, timeout: float = 10.0) -> str:
    """The next line the background sandbox printed (it must print one in time)."""
    assert sandbox.popen.stdout is not None
    fd = sandbox.popen.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            raise TimeoutError(f"no line from the sandbox; so far {data!r}")
        chunk = os.read(fd, 1)
        if not chunk:
            raise EOFError(f"sandbox closed stdout; so far {data!r}")
        data += chunk
    return data.decode().strip()


SANDVISOR = [sys.executable, "-m", "supervisor"]


def sandvisor(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The ``sandvisor`` command as a user runs it (this interpreter, a real process)."""
    return subprocess.run(
        [*SANDVISOR, *args], capture_output=True, timeout=60, input=input, env=env
    )


ROOTLESS = os.geteuid() != 0


class Watch:
    """A sandbox's processes as a test sees them, apart from the handle's own account:
    those of its fresh uid (a root host's sandbox), else those in its pid namespace,
    which the watch pins from the start (so its inode cannot be reused meanwhile)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.uid = sandbox.uid if sandbox.uid_kind == "fresh" else None
        self.ns_fd: int | None = None
        if self.uid is None:
            assert wait_for(lambda: sandbox.status.child_pid is not None)
            fd = os.open(f"/proc/{sandbox.status.child_pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            if os.fstat(fd).st_ino != sandbox.status.pid_namespace:
                os.close(fd)
                raise AssertionError("the sandbox ended before it was watched")
            self.ns_fd = fd

    def processes(self) -> list[psutil.Process]:
        if self.uid is not None:
            return uid_processes(self.uid)
        assert self.ns_fd is not None
        return namespace_processes(self.ns_fd)

    def close(self) -> None:
        if self.ns_fd is not None:
            os.close(self.ns_fd)
            self.ns_fd = None

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def uid_processes(uid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info["uids"]
        alive = proc.info["status"] != psutil.STATUS_ZOMBIE
        if uids and uid in (uids.real, uids.effective) and alive:
            found.append(proc)
    return found


def wait_for(predicate: object, timeout: float = 10.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def started(sandbox: Sandbox, count: int) -> bool:
    assert sandbox.cgroup is not None
    return wait_for(lambda: len(sandbox.cgroup.pids()) >= count)


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


TREE = Command(("/bin/sh", "-c", "for i in 1 2 3 4; do sleep 1000 & done; wait"))


def pin_namespace(inode: int) -> int | None:
    """An fd on the pid namespace ``inode`` (so it cannot be reused while a test watches),
    opened through a process in it; None if no process is in it any more."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fd = os.open(f"/proc/{entry.name}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            if os.fstat(fd).st_ino == inode:
                return fd
            os.close(fd)
    return None


def namespace_processes(ns_fd: int) -> list[psutil.Process]:
    """The live processes in the pid namespace held by ``ns_fd``."""
    held = os.fstat(ns_fd).st_ino
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            inode = os.stat(f"/proc/{proc.pid}/ns/pid").st_ino
        except OSError:
            continue
        if inode == held and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def tagged_processes(argv0: str) -> list[psutil.Process]:
    """The live processes whose argv[0] is ``argv0``: a bwrap and the init it forked, of a
    sandbox without a cgroup (its host's tag, `sandbox.lifeline.tag`)."""
    if not argv0.startswith("sandvisor-bwrap:"):
        return []
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if cmdline[:1] == [argv0] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found
