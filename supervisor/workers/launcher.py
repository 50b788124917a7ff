"""The narrow seam between a session and whatever starts its worker process.

A session creates four pipes (protocol in and out, stdout, stderr), hands the child ends
to a `Launcher`, and gets back a `SpawnedWorker`: the started worker whose protocol pipes
are its fds 3 and 4, plus what it takes to kill the whole process tree, say how it ended,
and prove that nothing survived. The `Supervisor` always satisfies this with
`supervisor.workers.sandboxed.SandboxLauncher` (bubblewrap): there is no unsandboxed launcher in
the package, so there is nothing weaker to fall back to.
"""

from __future__ import annotations

import contextlib
import os
from typing import Protocol

import anyio


class SpawnedWorker(Protocol):
    """A started worker and the handle of what contains it."""

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int:
        """The worker's exit status, once it has exited (negative: killed by signal)."""
        ...

    def kill(self, reason: str) -> None:
        """Kill everything the worker started (idempotent, synchronous, fast)."""

    def termination(self, *, deadline_fired: bool = False) -> str | None:
        """After `wait`: the container's classification of the end (``exited``,
        ``signal``, ``memory``, ``pids``, ``cpu``, ``timeout``), or None."""

    def peak_memory(self) -> int | None:
        """Peak memory of the whole worker in bytes, if the container measures it."""

    def survivors(self, *, thorough: bool = True) -> list[int]:
        """Pids of the worker's processes still alive (empty once it is torn down).
        ``thorough=False``: only what the container itself tracks (fast)."""

    async def cleanup(self) -> None:
        """After `wait`: prove nothing survives and release what the container holds."""


class Launcher(Protocol):
    """Starts workers: ``fd_in`` becomes the child's fd 3, ``fd_out`` its fd 4, and
    ``stdout``/``stderr`` its fds 1 and 2 (stdin is ``/dev/null``). The caller keeps
    ownership of the fds it passes and closes them after `spawn` returns. A worker that
    cannot start raises, saying why (the sandbox's `sandbox.LaunchError` or
    `sandbox.SandboxUnavailable`); the session fails closed on any exception."""

    async def spawn(self, fd_in: int, fd_out: int, stdout: int, stderr: int) -> SpawnedWorker: ...


async def start_worker(launcher: Launcher) -> tuple[SpawnedWorker, tuple[int, int, int, int]]:
    """Spawn through ``launcher`` with fresh pipes; returns the worker and the host's ends
    (to its fd 3, from its fd 4, from its stdout, from its stderr), which the caller owns.
    The child's ends are closed here, whatever happens."""
    pipes = [os.pipe() for _ in range(4)]
    child_ends = (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1])
    host_ends = (pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0])
    try:
        spawned = await launcher.spawn(*child_ends)
    except BaseException:
        for fd in host_ends:
            os.close(fd)
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    return spawned, host_ends


#: Seconds a discarded worker has to be reaped after its kill.
DISCARD_REAP_TIMEOUT = 5.0


class StartedWorker:
    """A worker started already, held for a session: the MCP describer, which becomes
    the group's first session (its server starts once). Its holder owns it until a
    session takes it (`take`); one never taken is discarded (`discard`)."""

    def __init__(
        self, spawned: SpawnedWorker, fds: tuple[int, int, int, int], stderr: bytes = b""
    ) -> None:
        self.spawned = spawned
        #: The host's ends, as `start_worker` returns them.
        self.fds = fds
        #: What the worker wrote on its stderr while it was held (diagnostics).
        self.stderr = stderr
        self.taken = False

    def take(self) -> tuple[SpawnedWorker, tuple[int, int, int, int]]:
        """The worker and its fds, for a session's `run` (once)."""
        if self.taken:
            raise RuntimeError("a started worker is taken once")
        self.taken = True
        return self.spawned, self.fds

    async def discard(self, reason: str = "unused") -> None:
        """Kill, reap and release it, and close the host's ends (unless taken)."""
        if self.taken:
            return
        self.taken = True
        with anyio.CancelScope(shield=True):
            self.spawned.kill(reason)
            with anyio.move_on_after(DISCARD_REAP_TIMEOUT):
                await self.spawned.wait()
            for fd in self.fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            await self.spawned.cleanup()
