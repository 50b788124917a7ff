"""Why a sandbox ended: parse bwrap's status lines and classify the end. Pure functions.

bwrap writes ``{"child-pid": N, "pid-namespace": INODE, ...}`` when the sandbox starts
(before its child may do anything: the child waits for bwrap's word) and ``{"exit-code": N}``
(128+n for a signal) when the program ends; a failure before the program ran leaves no
exit-code line, and our own pre-exec set-up writes ``{"sandvisor-setup-error": "..."}``.
With the cgroup counters, the caller's word on the wall deadline and the CPU time used,
that is enough to say which limit ended a process.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any, Literal

from .cgroups import CgroupCounters
from .childsetup import SETUP_ERROR_KEY

Reason = Literal["exited", "signal", "timeout", "cpu", "memory", "pids", "killed", "setup"]

#: `sandvisor exec` exit statuses of its own (the program's status otherwise).
EXIT_TIMEOUT = 124
EXIT_SANDBOX_FAILURE = 125


@dataclass
class BwrapStatus:
    """What the status channel has said so far."""

    child_pid: int | None = None
    pid_namespace: int | None = None  # the inode of the sandbox's pid namespace
    exit_code: int | None = None
    setup_error: str | None = None
    _partial: bytes = field(default=b"", repr=False)

    def feed(self, data: bytes) -> None:
        """Add bytes read from the channel; complete lines are parsed, others kept."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > 65536:
            self._partial = b""  # not bwrap's output; never grow without bound
        for line in lines:
            self._parse(line)

    def _parse(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        pid, code = record.get("child-pid"), record.get("exit-code")
        err = record.get(SETUP_ERROR_KEY)
        if isinstance(pid, int) and self.child_pid is None:
            self.child_pid = pid
            ns = record.get("pid-namespace")
            self.pid_namespace = ns if isinstance(ns, int) else None
        if isinstance(code, int) and self.exit_code is None:
            self.exit_code = code
        if isinstance(err, str) and self.setup_error is None:
            self.setup_error = err


@dataclass(frozen=True)
class Termination:
    """How a sandbox ended. ``exit_code`` is set when the program exited, ``signal`` when
    a signal ended it; ``limits_hit`` lists the limits whose counters fired."""

    reason: Reason
    exit_code: int | None = None
    signal: int | None = None
    limits_hit: frozenset[str] = frozenset()
    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    detail: str = ""
    #: The guarantees the sandbox ran without: per-process limits where no cgroup could
    #: be had (`sandbox.limits`), in words; empty for a sandbox with all of them.
    weakened: tuple[str, ...] = ()

    @property
    def exit_status(self) -> int:
        """The shell-style status `sandvisor exec` exits with."""
        if self.reason == "timeout":
            return EXIT_TIMEOUT
        if self.reason == "setup":
            return EXIT_SANDBOX_FAILURE
        if self.signal is not None:
            return 128 + self.signal
        return self.exit_code if self.exit_code is not None else EXIT_SANDBOX_FAILURE

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "limits_hit": sorted(self.limits_hit),
            "peak_memory_bytes": self.peak_memory_bytes,
            "cpu_seconds": self.cpu_seconds,
            "detail": self.detail,
            "weakened": list(self.weakened),
        }


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify(
    *,
    status: BwrapStatus,
    returncode: int,
    counters: CgroupCounters,
    timed_out: bool = False,
    kill_reason: str | None = None,
    cpu_seconds_used: float | None = None,
    cpu_limit: int | None = None,
    memory_limit: int | None = None,
    weakened: tuple[str, ...] = (),
) -> Termination:
    """Classify the end of a sandbox whose bwrap exited with ``returncode`` (negative:
    killed by that signal, as `subprocess` reports it)."""
    code: int | None = None
    sig: int | None = None
    if status.exit_code is not None:
        if 128 < status.exit_code <= 128 + 64:
            sig = status.exit_code - 128
        else:
            code = status.exit_code
    elif returncode < 0:
        sig = -returncode  # bwrap itself was killed
    elif 128 < returncode <= 128 + 64 and kill_reason is not None:
        sig = returncode - 128  # bwrap reported its init's death before the program ran
    limits: set[str] = set()
    if counters.oom_kills:
        limits.add("memory")
    if counters.pids_limit_hits:
        limits.add("pids")
    cpu_exceeded = sig == signal.SIGXCPU or (
        cpu_limit is not None and cpu_seconds_used is not None and cpu_seconds_used >= cpu_limit
    )
    if cpu_exceeded:
        limits.add("cpu")
    common: dict[str, Any] = {
        "exit_code": code,
        "signal": sig,
        "limits_hit": frozenset(limits),
        "peak_memory_bytes": counters.peak_memory_bytes,
        "cpu_seconds": cpu_seconds_used,
        "weakened": weakened,
    }
    never_ran = status.exit_code is None and returncode >= 0 and kill_reason is None
    if status.setup_error is not None or never_ran:
        detail = status.setup_error or f"bwrap exited {returncode} before the program ran"
        return Termination("setup", **{**common, "exit_code": None}, detail=detail)
    if timed_out or kill_reason == "timeout":
        return Termination("timeout", **common, detail="the wall-clock deadline expired")
    if counters.oom_kills:
        limit = f" of {memory_limit} bytes" if memory_limit else ""
        return Termination("memory", **common, detail=f"killed at the memory limit{limit}")
    if cpu_exceeded and sig is not None:
        return Termination("cpu", **common, detail=f"CPU time limit of {cpu_limit} s reached")
    if kill_reason is not None:
        return Termination("killed", **common, detail=f"killed by the host: {kill_reason}")
    if counters.pids_limit_hits and (sig is not None or code != 0):
        return Termination("pids", **common, detail="the process limit refused a fork")
    if sig is not None:
        return Termination("signal", **common, detail=f"killed by {_signal_name(sig)}")
    return Termination("exited", **common, detail=f"exited with status {code}")
