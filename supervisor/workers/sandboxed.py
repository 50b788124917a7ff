"""Workers in bubblewrap: the only `Launcher` the `Supervisor` uses.

Each spawn prepares a fresh `sandbox.LaunchPlan` (its own cgroup, uid, seccomp filter,
pinned binds) with the protocol pipes mapped to fds 3 and 4, and forks it from the
supervisor's `sandbox.Spawner` thread, which lives as long as the supervisor
(``PR_SET_PDEATHSIG`` follows the parent *thread*: an event loop's worker threads would
let sandboxes die once they idle out).
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Sequence

import psutil

from sandbox import (
    Command,
    Sandbox,
    SandboxPolicy,
    Spawner,
    prepare_launch,
    worker_command,
)
from supervisor._loop import run_in_daemon_thread
from supervisor.workers.launcher import SpawnedWorker


class SandboxedWorker:
    """A `SpawnedWorker` backed by a `sandbox.Sandbox`."""

    __slots__ = ("_sandbox", "_termination")

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox
        self._termination: str | None = None

    @property
    def pid(self) -> int:
        return self._sandbox.pid

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    async def wait(self) -> int:
        return await self._sandbox.wait_async()

    def kill(self, reason: str) -> None:
        self._sandbox.kill(reason)

    def termination(self, *, deadline_fired: bool = False) -> str | None:
        if self._sandbox.returncode is None:
            return None
        return self._sandbox.termination(timed_out=deadline_fired).reason

    def peak_memory(self) -> int | None:
        return self._sandbox.peak_memory_bytes

    def survivors(self, *, thorough: bool = True) -> list[int]:
        """Live processes of the sandbox. Zombies are dead and excluded: an orphaned
        one waits for the host's pid 1 to reap it, which on some hosts takes a while.
        ``thorough=False`` trusts the sandbox's cgroup (nothing leaves it) and skips the
        scan of every process for the sandbox's uid."""
        sandbox = self._sandbox
        scan = thorough or sandbox.cgroup is None
        return [p.pid for p in sandbox.survivors(thorough=scan) if not _zombie(p)]

    async def cleanup(self) -> None:
        """Reap, prove and remove in a daemon thread: a loop stopped meanwhile must not
        keep the interpreter from exiting (the host's death takes the sandbox down)."""
        await run_in_daemon_thread(self._sandbox.cleanup, "sandvisor-cleanup")


class SandboxLauncher:
    """Starts ``command`` in ``policy``'s sandbox, from ``spawner``'s thread."""

    def __init__(self, policy: SandboxPolicy, command: Command, spawner: Spawner) -> None:
        self.policy = policy
        self.command = command
        self._spawner = spawner

    async def spawn(self, fd_in: int, fd_out: int, stdout: int, stderr: int) -> SpawnedWorker:
        plan = prepare_launch(self.policy, self.command, fds={3: fd_in, 4: fd_out})
        sandbox = await self._spawner.spawn_async(
            plan, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )
        return SandboxedWorker(sandbox)

    def with_args(self, *extra: str) -> SandboxLauncher:
        """The same sandbox and program with more arguments (e.g. ``--describe``)."""
        changed = dataclasses.replace(self.command, argv=(*self.command.argv, *extra))
        return SandboxLauncher(self.policy, changed, self._spawner)


def _zombie(process: psutil.Process) -> bool:
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True  # gone


def python_worker_command(adapters: Sequence[str]) -> Command:
    """``python -m worker_runtime --adapters ...`` seeing only what it needs."""
    return worker_command(list(adapters))


def program_command(argv: Sequence[str]) -> Command:
    """Any program that speaks the protocol on fds 3 and 4 (binds come from the policy)."""
    return Command(tuple(argv))
