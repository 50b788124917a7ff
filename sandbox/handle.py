"""`Sandbox`: a started sandbox, from its pid to proof that nothing of it is left.

Built from the started bwrap process (the direct child of the host). It reaps with
``wait4`` (for the CPU time of the whole reaped tree), waits on a pidfd (so trio can await
it with ``wait_readable``), kills in one fast synchronous call, classifies the end, lists
survivors with psutil, and removes its cgroups. Safe to use from several threads: a
watchdog may `kill` while another thread waits.

Without a cgroup (per-process limits) the sandbox is held through its pid namespace
(`sandbox.pidns`): the init's pidfd to kill it and to know when everything is gone, the
namespace's inode to find its processes; without a uid of its own (rootless) that inode,
not the uid, is what a thorough search for survivors looks for.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING

from . import pidns
from .cgroups import CgroupCounters, SandboxCgroup
from .errors import ContainmentError
from .fdwait import wait_readable
from .policy import SandboxPolicy
from .termination import BwrapStatus, Termination, classify

if TYPE_CHECKING:
    from typing import TypeAlias

    import psutil

    from .forkserver import SandboxProcess
    from .launch import LaunchPlan

    #: The started bwrap: from a fork server, or a `subprocess.Popen` (the raw protocol).
    Process: TypeAlias = subprocess.Popen[bytes] | SandboxProcess

#: After killing the namespace's init, how long bwrap gets to reap it and exit by itself.
KILL_GRACE = 0.05
#: How long a kill waits for bwrap to stop (see `Sandbox._init_of_stopped_bwrap`).
STOP_WAIT = 1.0


class Sandbox:
    """One running (or ended) sandbox. Use as a context manager, or call `cleanup`."""

    def __init__(self, plan: LaunchPlan, popen: Process) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.uid = plan.uid
        self.uid_kind = plan.uid_kind  # "fresh" (its own), "fixed" (the policy's), "host"
        self.policy: SandboxPolicy = plan.policy
        self.weakened = plan.weakened  # the guarantees it runs without (`sandbox.limits`)
        self.cgroup: SandboxCgroup | None = plan.cgroup
        self.pidfd = os.pidfd_open(self.pid)
        self.started_at = time.monotonic()
        self._status_fd: int | None = plan.status_read_fd
        os.set_blocking(plan.status_read_fd, False)
        self._status: BwrapStatus = plan.status  # the gate may have read from it already
        self._lock = threading.RLock()
        self._returncode: int | None = None
        self._cpu_seconds: float | None = None
        self._kill_reason: str | None = None
        self._killed_at: float | None = None
        self._counters: CgroupCounters | None = None
        self._cleaned = False
        self._init_pidfd: int | None = None
        self._pidns_fd: int | None = None  # its pid namespace, pinned while the init lives
        self._lease = plan.lease  # no cgroup: its count on the lifeline, until cleanup
        # A fresh uid belongs to this sandbox alone: any process with it is part of it.
        self._uid_is_unique = plan.uid_kind == "fresh"

    # --- state -----------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """bwrap's exit status once reaped (negative: killed by that signal)."""
        return self._returncode

    @property
    def finished(self) -> bool:
        """Cleaned up: reaped, proven gone, cgroups removed."""
        return self._cleaned

    @property
    def kill_reason(self) -> str | None:
        return self._kill_reason

    @property
    def status(self) -> BwrapStatus:
        self._read_status()
        return self._status

    def _read_status(self) -> None:
        with self._lock:
            while self._status_fd is not None:
                try:
                    data = os.read(self._status_fd, 65536)
                except BlockingIOError:
                    return
                except OSError:
                    return
                if not data:
                    os.close(self._status_fd)
                    self._status_fd = None
                    return
                self._status.feed(data)

    # --- waiting ---------------------------------------------------------------------

    def poll(self) -> int | None:
        """Reap bwrap if it has exited; its status, or None while it runs."""
        with self._lock:
            if self._returncode is not None:
                return self._returncode
            try:
                pid, wstatus, usage = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Someone else reaped it (a `Popen.poll`): take its word for the status.
                rc = self.popen.returncode
                self._returncode = rc if rc is not None else -signal.SIGKILL
                return self._returncode
            if pid == 0:
                return None
            self._returncode = os.waitstatus_to_exitcode(wstatus)
            self._cpu_seconds = usage.ru_utime + usage.ru_stime
            self.popen.returncode = self._returncode
            self._counters = self.cgroup.counters() if self.cgroup else CgroupCounters()
            return self._returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until bwrap exits (or ``timeout`` seconds pass: None is returned)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        while (rc := self.poll()) is None:
            if deadline is None:
                poller.poll()
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                poller.poll(max(1, int(left * 1000)))
        return rc

    async def wait_async(self) -> int:
        """Await the exit from trio or asyncio (anyio, on the pidfd; the event loop is
        never blocked)."""
        import anyio

        while (rc := self.poll()) is None:
            await anyio.wait_readable(self.pidfd)
        return rc

    # --- killing ---------------------------------------------------------------------

    def kill(self, reason: str = "killed") -> None:
        """SIGKILL the whole sandbox now. Idempotent, synchronous, fast (a few ms at most);
        the first reason given is the one recorded (``"timeout"`` classifies as timeout).

        The pid namespace's init goes first: the kernel then kills everything in the
        namespace at once (no fork gets through) and bwrap, still alive, reaps it, so no
        orphan is left for the host's pid 1. Then the cgroup is killed as a sweep (it
        also covers a kill before the namespace exists) and bwrap itself."""
        with self._lock:
            if self._kill_reason is None and self._returncode is None:
                self._kill_reason = reason
                self._killed_at = time.monotonic()
            if self._returncode is None:
                init = self._namespace_init()
                if init is None and self.cgroup is None:
                    init = self._init_of_stopped_bwrap()
                if init is not None:
                    _sigkill(init)
                    wait_readable(self.pidfd, KILL_GRACE)
            elif self.cgroup is None and self._init_alive():
                assert self._init_pidfd is not None
                _sigkill(self._init_pidfd)  # orphaned: bwrap was killed before it
            if self.cgroup is not None and not self.cgroup.removed:
                self.cgroup.kill()
            if self._returncode is None:
                _sigkill(self.pidfd)

    def _namespace_init(self) -> int | None:
        """A pidfd for the sandbox's pid 1, opened once and checked to be ours (none
        after cleanup: it ended then, and what cleanup closed stays closed)."""
        if self._init_pidfd is not None or self._cleaned:
            return self._init_pidfd
        self._read_status()
        pid = self._status.child_pid
        return self._adopt_init(pid) if pid is not None else None

    def _adopt_init(self, pid: int) -> int | None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return None
        if not self._is_ours(pid):  # the pid was reused after the init was reaped
            os.close(fd)
            return None
        self._init_pidfd = fd
        self._pidns_fd = pidns.pin(pid, fd, self._status.pid_namespace)
        return fd

    def _is_ours(self, pid: int) -> bool:
        """``pid`` is this sandbox's init: in the pid namespace bwrap named, else (bwrap
        said no namespace) in our cgroup, else bwrap's child while bwrap is unreaped."""
        if self._status.pid_namespace is not None:
            return pidns.inode_of(pid) == self._status.pid_namespace
        if self.cgroup is not None:
            try:
                with open(f"/proc/{pid}/cgroup") as f:
                    return self.cgroup.name in f.read()
            except OSError:
                return False
        return self._returncode is None and pidns.parent_of(pid) == self.pid

    def _init_of_stopped_bwrap(self) -> int | None:
        """bwrap has not said yet which child is the namespace's init (a kill in its first
        milliseconds). Stop bwrap, so it can neither clone nor let a child go on, then read
        its word once more, else take its child from /proc; bwrap goes on afterwards (to
        be killed). Its child waits for bwrap's word before anything, so without a cgroup
        to sweep this is what keeps it from running on, orphaned."""
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGSTOP)
        except OSError:
            return None
        try:
            deadline = time.monotonic() + STOP_WAIT
            stopped = None
            while stopped is None and time.monotonic() < deadline:
                stopped = os.waitid(
                    os.P_PIDFD, self.pidfd, os.WSTOPPED | os.WEXITED | os.WNOWAIT | os.WNOHANG
                )
                if stopped is None:
                    time.sleep(0.0005)
            init = self._namespace_init()
            for child in pidns.children(self.pid) if init is None else ():
                if (init := self._adopt_init(child)) is not None:
                    break
            return init
        except ChildProcessError:
            return None
        finally:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGCONT)

    def _init_alive(self) -> bool:
        """The namespace's init still runs after bwrap ended (orphaned: bwrap was killed
        before the init armed its own death signal). bwrap's exit code line means it
        reaped the init; the kernel had then ended everything in the namespace."""
        self._read_status()
        if self._status.exit_code is not None:
            return False
        fd = self._namespace_init()
        return fd is not None and pidns.alive(fd)

    # --- the end -----------------------------------------------------------------------

    def termination(self, *, timed_out: bool = False) -> Termination:
        """Why the sandbox ended (wait first). ``timed_out``: the caller's deadline fired."""
        rc = self.wait()
        assert rc is not None
        self._read_status()
        return classify(
            status=self._status,
            returncode=rc,
            counters=self._counters or CgroupCounters(),
            timed_out=timed_out,
            kill_reason=self._kill_reason,
            cpu_seconds_used=self._cpu_seconds,
            cpu_limit=self.policy.cpu_seconds,
            memory_limit=self.policy.memory_bytes,
            weakened=self.weakened,
        )

    @property
    def peak_memory_bytes(self) -> int | None:
        counters = self._counters or (self.cgroup.counters() if self.cgroup else None)
        return counters.peak_memory_bytes if counters else None

    def survivors(self, *, thorough: bool = True) -> list[psutil.Process]:
        """Processes of this sandbox that still run (zombies are dead and left out).

        Always: the members of its cgroups, bwrap's process tree, and an init that bwrap
        left orphaned. ``thorough`` also scans every process of the machine: for the
        sandbox's own uid where it has one (a fresh uid is this sandbox's alone), else
        for its pid namespace (`sandbox.pidns`); that finds anything that escaped the
        rest. The sandbox's uid cannot move a process out of its cgroup, so `cleanup`
        scans only without one."""
        members = (
            self.cgroup.pids() if self.cgroup is not None and not self.cgroup.removed else set()
        )
        ended = self._returncode is not None
        orphan = ended and self.cgroup is None and self._init_alive()
        if not members and ended and not orphan and not (thorough and self._uid_is_unique):
            return []  # the common end of a sandbox: no psutil (`sandvisor exec` saves ~13 ms)
        import psutil  # here, not at import: `sandvisor exec` starts faster without it

        found: dict[int, psutil.Process] = {}
        if members:
            for pid in members:
                with contextlib.suppress(psutil.Error):
                    found[pid] = psutil.Process(pid)
        if self._returncode is None:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.pid)
                found[root.pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = child
        if orphan and self._status.child_pid is not None:
            with contextlib.suppress(psutil.Error):
                init = psutil.Process(self._status.child_pid)
                found[init.pid] = init
                for child in init.children(recursive=True):
                    found[child.pid] = child
        if thorough and self._uid_is_unique:
            for proc in psutil.process_iter(["uids"]):
                uids = proc.info.get("uids")
                if uids is not None and self.uid in (uids.real, uids.effective):
                    found[proc.pid] = proc
        elif thorough and (self._pidns_fd is not None or self._namespace_init() is not None):
            for pid in pidns.members(self._pidns_fd) if self._pidns_fd is not None else ():
                with contextlib.suppress(psutil.Error):
                    found[pid] = psutil.Process(pid)
        return [p for p in found.values() if _exists(p)]

    def cleanup(self, timeout: float = 2.0) -> None:
        """Kill what is left, reap, prove nothing survives, remove the cgroups, close fds.

        Idempotent. Raises `ContainmentError` if something of the sandbox outlives
        ``timeout`` (it has then been SIGKILLed repeatedly, and is reported by pid)."""
        with self._lock:
            if self._cleaned:
                return
            if self._returncode is None:
                self.kill(self._kill_reason or "cleanup")
            self.wait(timeout)
            deadline = time.monotonic() + timeout
            thorough = self.cgroup is None
            while (left := self.survivors(thorough=thorough)) or self._returncode is None:
                if time.monotonic() > deadline:
                    raise ContainmentError(
                        f"sandbox uid {self.uid}: processes {[p.pid for p in left]} survive"
                    )
                self.kill(self._kill_reason or "cleanup")
                self.poll()
                time.sleep(0.001)
            self._await_namespace_end(deadline, timeout)
            self._read_status()
            if self.cgroup is not None:
                if self._counters is None:
                    self._counters = self.cgroup.counters()
                self.cgroup.remove(timeout)
            if self._status_fd is not None:
                os.close(self._status_fd)
                self._status_fd = None
            for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            for fd in (self._init_pidfd, self._pidns_fd):
                if fd is not None:
                    os.close(fd)
            self._init_pidfd = self._pidns_fd = None
            if self._lease is not None:
                self._lease.release()
            os.close(self.pidfd)
            self._cleaned = True

    def _await_namespace_end(self, deadline: float, timeout: float) -> None:
        """Wait until the pid namespace's init has exited: a SIGKILLed init leaves its
        cgroup at once, then waits in the kernel until every other process of the
        namespace is reaped (they too out of the cgroup, exiting); once its pidfd reads
        ready, nothing of the namespace is left but the init's zombie."""
        init = self._namespace_init()
        if init is not None and not wait_readable(init, deadline - time.monotonic()):
            raise ContainmentError(
                f"sandbox uid {self.uid}: its pid namespace's init (pid "
                f"{self._status.child_pid}) is still exiting after {timeout} s: a process "
                "of the namespace is not reaped (is one traced or waited for from outside?)"
            )

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def _exists(proc: psutil.Process) -> bool:
    import psutil

    try:
        return bool(proc.is_running()) and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _sigkill(pidfd: int) -> None:
    """SIGCONT then SIGKILL (a stopped process dies either way; SIGCONT is for tracers
    and for what a freezer holds), ignoring a process already gone."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(pidfd, sig)
