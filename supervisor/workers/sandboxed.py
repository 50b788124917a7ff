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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import psutil

from sandbox import (
    Bind,
    Command,
    LaunchError,
    Sandbox,
    SandboxPolicy,
    Spawner,
    prepare_launch,
    worker_command,
)
from sandbox.netproxy.server import CallTag, Endpoint, ProxyServer
from supervisor._loop import run_in_daemon_thread
from supervisor.workers.launcher import SpawnedWorker

if TYPE_CHECKING:
    from supervisor.workers.session import Session


class SandboxedWorker:
    """A `SpawnedWorker` backed by a `sandbox.Sandbox` (and its proxy endpoint, if its
    policy has a network allowlist: closed, its socket removed, with the cleanup)."""

    __slots__ = ("_endpoint", "_sandbox", "_termination")

    def __init__(self, sandbox: Sandbox, endpoint: Endpoint | None = None) -> None:
        self._sandbox = sandbox
        self._endpoint = endpoint
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
        keep the interpreter from exiting (the host's death takes the sandbox down).
        Then the proxy endpoint goes: its connections end, its socket is removed."""
        try:
            await run_in_daemon_thread(self._sandbox.cleanup, "sandvisor-cleanup")
        finally:
            if self._endpoint is not None:
                self._endpoint.close()


class SessionCalls:
    """The calls in flight on one session, as the network proxy charges them: bound to
    the session once it exists (it spawns its worker after that)."""

    __slots__ = ("session",)

    def __init__(self) -> None:
        self.session: Session | None = None

    @property
    def label(self) -> str | None:
        return None if self.session is None else self.session.id

    def __call__(self) -> tuple[CallTag, ...]:
        session = self.session
        if session is None:
            return ()
        return tuple(CallTag(tool, rid) for tool, rid in session.calls_in_flight())


class SandboxLauncher:
    """Starts ``command`` in ``policy``'s sandbox, from ``spawner``'s thread. A policy
    with a network allowlist needs ``proxy``: each sandbox gets an endpoint of its own,
    labelled with ``group`` and charging the calls ``calls`` says are in flight."""

    def __init__(
        self,
        policy: SandboxPolicy,
        command: Command,
        spawner: Spawner,
        *,
        proxy: ProxyServer | None = None,
        group: str | None = None,
        calls: SessionCalls | None = None,
    ) -> None:
        self.policy = policy
        self.command = command
        self._spawner = spawner
        self._proxy = proxy
        self._group = group
        self._calls = calls

    async def spawn(self, fd_in: int, fd_out: int, stdout: int, stderr: int) -> SpawnedWorker:
        endpoint = await self._endpoint()
        try:
            plan = prepare_launch(
                self.policy,
                self.command,
                fds={3: fd_in, 4: fd_out},
                network=None if endpoint is None else endpoint.directory,
            )
            sandbox = await self._spawner.spawn_async(
                plan, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
            )
        except BaseException:
            if endpoint is not None:
                endpoint.close()
            raise
        return SandboxedWorker(sandbox, endpoint)

    async def _endpoint(self) -> Endpoint | None:
        allowlist = self.policy.allowlist
        if allowlist is None:
            return None
        if self._proxy is None:  # fail closed: never a sandbox without its way out
            raise LaunchError("the policy has a network allowlist, but no proxy runs for it")
        calls = self._calls
        return await self._proxy.open(
            allowlist,
            group=self._group,
            sandbox=None if calls is None else calls.label,
            calls=calls if calls is not None else (lambda: ()),
        )

    def with_args(self, *extra: str) -> SandboxLauncher:
        """The same sandbox and program with more arguments (e.g. ``--describe``)."""
        changed = dataclasses.replace(self.command, argv=(*self.command.argv, *extra))
        return self._copy(command=changed)

    def for_session(self, calls: SessionCalls) -> SandboxLauncher:
        """The same launcher for one session, whose calls its endpoint charges."""
        return self._copy(calls=calls)

    def with_command(self, **changes: object) -> SandboxLauncher:
        """The same launcher with the command's fields changed (secrets' delivery)."""
        return self._copy(command=dataclasses.replace(self.command, **changes))  # type: ignore[arg-type]

    def with_bind(self, bind: Bind, env: Mapping[str, str]) -> SandboxLauncher:
        """The same launcher with one more bind in the policy and variables for the
        program (a group's worker journal)."""
        policy = self.policy.replace(binds=(*self.policy.binds, bind))
        command = dataclasses.replace(self.command, env={**self.command.env, **env})
        return self._copy(policy=policy, command=command)

    def _copy(self, **changes: object) -> SandboxLauncher:
        fields: dict[str, object] = {
            "proxy": self._proxy,
            "group": self._group,
            "calls": self._calls,
        }
        command = changes.pop("command", self.command)
        policy = changes.pop("policy", self.policy)
        fields.update(changes)
        return SandboxLauncher(policy, command, self._spawner, **fields)  # type: ignore[arg-type]


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
