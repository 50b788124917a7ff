"""One tool group while its supervisor runs: its launcher, its tools, its pool.

Built from a `ToolGroup` when the supervisor starts: the group's secrets are read (a
missing one refuses the start) and turned into its command's private variables or files
and its redactor; its tools are described in its own sandbox (never the host: adapter
modules are untrusted) and bounded by its policies and overrides; its pool's sessions
have its grants, its redactor and, with a network allowlist, a proxy endpoint each that
charges the calls in flight on that session. A group without network pays nothing for
the proxy: no endpoint, no per-session binding, no per-call step.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from sandbox import Command, Spawner
from sandbox.netproxy.server import ProxyServer
from supervisor.ledger import ToolPolicy
from supervisor.workers.grants import describe, describe_and_keep, grant_for, merge_policies
from supervisor.workers.groups import ToolGroup, apply_overrides
from supervisor.workers.launcher import StartedWorker
from supervisor.workers.mcp_worker import MCP_CANCEL_GRACE, bridge_command
from supervisor.workers.pool import Pool
from supervisor.workers.sandboxed import (
    SandboxLauncher,
    SessionCalls,
    program_command,
    python_worker_command,
)
from supervisor.workers.secrets import Redactor, delivery, redactor_for, resolve
from supervisor.workers.session import Session, SessionConfig
from supervisor.workers.watchdog import DEFAULT_HOST_CANCEL_GRACE
from supervisor.workers.worker_journal import GroupJournal, WorkerJournals
from worker_runtime.bridges.mcp import TOOLS_CHANGED_NOTICE
from worker_runtime.protocol.messages import ToolSpec

OnDead = Callable[[Session], None]


class GroupRuntime:
    """A running group. ``policies`` and ``specs`` are known after `describe`; ``pool``
    after `make_pool`."""

    def __init__(
        self,
        group: ToolGroup,
        spawner: Spawner,
        proxy: ProxyServer | None,
        start_timeout: float,
    ) -> None:
        self.group = group
        values = resolve(group.secrets)
        self.redactor: Redactor | None = redactor_for(values)
        secrets = delivery(values, group.secrets_as)
        del values

        def launcher(command: Command) -> SandboxLauncher:
            command = dataclasses.replace(command, **secrets)  # type: ignore[arg-type]
            return SandboxLauncher(group.policy, command, spawner, proxy=proxy, group=group.name)

        self.describer: SandboxLauncher | None = None
        if group.mcp_server is not None:
            # the bridge's own bound comes first, so its one line says why
            bound = max(0.5, min(start_timeout * 0.8, start_timeout - 1.5))
            bridge = functools.partial(
                bridge_command,
                group.mcp_server,
                prefix=group.tool_prefix,
                start_timeout=bound,
                path=group.policy.env.get("PATH"),
                exclude=[b.dest for b in group.policy.binds],
            )
            self.launcher = launcher(bridge(describe=False))
            self.describer = launcher(bridge(describe=True))
        elif group.worker_argv is not None:
            self.launcher = launcher(program_command(group.worker_argv))
        else:
            self.launcher = launcher(python_worker_command(group.adapters))
            self.describer = self.launcher.with_args("--describe")
        self.policies: dict[str, ToolPolicy] = {}
        self.specs: dict[str, ToolSpec] = {}
        #: Called (synchronously, from a session's task) when the group's MCP server says
        #: its tools changed; the supervisor re-describes the group then.
        self.on_tools_changed: Callable[[], None] | None = None
        #: The group's worker journal (spec section 11), once opened; None without one.
        self.journal: GroupJournal | None = None
        self._pool: Pool | None = None
        self._config: SessionConfig | None = None
        self._first_worker: StartedWorker | None = None

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError(f"group {self.name!r} has no pool yet")
        return self._pool

    async def describe(self, timeout: float, *, first: bool = False) -> None:
        """Learn the group's tools (in its own sandbox) and bound them. ``first``: the
        supervisor's start; an MCP server's describer is then kept as the first session
        (`first_worker`), so that the server starts once, not twice."""
        group = self.group
        described = None
        if self.describer is not None and first and self._keeps_describer():
            described, self._first_worker = await describe_and_keep(
                self.describer, timeout, "the MCP server", self.redactor
            )
        elif self.describer is not None:
            what = "the MCP server" if group.mcp_server is not None else "the adapters"
            described = await describe(self.describer, timeout, what, self.redactor)
        policies = merge_policies(described, group.tools)
        self.policies = apply_overrides(policies, group.overrides, group.name)
        for tool in group.redactors:
            if tool not in self.policies:
                raise ValueError(
                    f"group {group.name!r}: tool {tool!r} has a redactor but is not served"
                )
        by_name = {spec.name: spec for spec in described or ()}
        self.specs = {
            name: by_name.get(name) or ToolSpec(name, policy.format)
            for name, policy in self.policies.items()
        }

    def _keeps_describer(self) -> bool:
        """An MCP group's describer is the sandbox its sessions get (the same command but
        ``--describe``, the same policy and secrets) unless a session's sandbox has more:
        a proxy endpoint of its own (a network allowlist) or the worker journal's bind."""
        group = self.group
        return group.mcp_server is not None and group.policy.allowlist is None

    async def discard_first_worker(self) -> None:
        """The kept describer, if no session took it (the supervisor's start failed, or
        the pool starts no session, or the group journals)."""
        worker, self._first_worker = self._first_worker, None
        if worker is not None:
            await worker.discard()

    def open_journal(self, journals: WorkerJournals) -> GroupJournal | None:
        """The group's worker journal, if it serves an effectful tool (after `describe`):
        bound writable into its sandboxes, apart from their other binds."""
        effectful = [name for name, spec in self.specs.items() if spec.effectful]
        if effectful:
            binds = (*self.group.policy.binds, *self.launcher.command.binds)
            self.journal = journals.group(self.name, effectful, binds)
        return self.journal

    def make_pool(
        self, base: SessionConfig, retire_margin: float, cancel_grace: float | None
    ) -> Pool:
        """The group's pool: its sessions' grants, limits, redactor and journal are the
        group's. ``cancel_grace``: the supervisor's, if it was given (else each kind's
        default)."""
        group = self.group
        config = dataclasses.replace(
            base,
            grants=tuple(grant_for(p, group.calls_per_worker) for p in self.policies.values()),
            max_in_flight=group.max_in_flight,
            redact=self.redactor,
            journal=self.journal,
        )
        grace = group.cancel_grace if group.cancel_grace is not None else cancel_grace
        if grace is not None:  # given: it is the grace of every cancel
            config = dataclasses.replace(
                config, cancel_grace=float(grace), host_cancel_grace=float(grace)
            )
        elif group.mcp_server is not None:
            config = dataclasses.replace(
                config,
                cancel_grace=MCP_CANCEL_GRACE,
                host_cancel_grace=max(MCP_CANCEL_GRACE, DEFAULT_HOST_CANCEL_GRACE),
            )
        if group.mcp_server is not None:
            config = dataclasses.replace(config, on_stdout=self._heard)
        self._config = config
        launcher = self.launcher
        if self.journal is not None:
            launcher = launcher.with_bind(self.journal.bind(), self.journal.env)

        def session(on_dead: OnDead) -> Session:
            assert self._config is not None
            worker = None
            if self.journal is None:  # else its sandbox lacks the journal's bind
                worker, self._first_worker = self._first_worker, None
            return Session(launcher, self._config, on_dead=on_dead, worker=worker)

        def session_with_network(on_dead: OnDead) -> Session:
            assert self._config is not None
            calls = SessionCalls()
            made = Session(launcher.for_session(calls), self._config, on_dead=on_dead)
            calls.session = made
            return made

        assert group.pool_min is not None  # filled in at construction
        self._pool = Pool(
            session if group.policy.allowlist is None else session_with_network,
            size=group.pool_size,
            min_size=group.pool_min,
            max_in_flight=group.max_in_flight,
            max_calls=group.calls_per_worker,
            retire_margin=retire_margin,
        )
        return self._pool

    def regrant(self) -> None:
        """After a new `describe`: sessions from now on are granted the new tools, and the
        ready ones (granted the old) are retired, each closed once its calls end. One still
        starting is left to start (retiring it would kill it, and fail the calls waiting
        for a worker); a call it was not granted retires it then (`outdated`)."""
        assert self._config is not None, "regrant after make_pool"
        grants = tuple(grant_for(p, self.group.calls_per_worker) for p in self.policies.values())
        self._config = dataclasses.replace(self._config, grants=grants)
        for session in self.pool.sessions:
            if session.state == "ready":
                self.pool.retire(session)

    def outdated(self, session: Session) -> bool:
        """Whether ``session`` was granted the tools of an earlier `describe`."""
        return self._config is not None and session.config is not self._config

    def _heard(self, data: bytes) -> None:
        if TOOLS_CHANGED_NOTICE in data and self.on_tools_changed is not None:
            self.on_tools_changed()
