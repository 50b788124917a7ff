"""`Supervisor`: sandboxed workers behind one ``await sup.invoke(tool, value)``.

The supervisor keeps the configuration (`SupervisorConfig`), the tool groups with their
pools, the ledger, the audit hub and one task group; each call is its own `Call`
(supervisor.workers.calls), which moves it through its lifecycle (admit, claim, dispatch,
chunks, cancel, deadline, retry, resolve) as things happen to it. Every call is an
operation of the supervisor's `Ledger`: ``start`` here (with the call's deadline and
idempotency key), then ``claim`` and exactly one of
``complete``/``fail``/``confirm_cancellation``/``cancel``, or ``mark_indeterminate`` (the
operation stays pending until reconciled or expired: never re-dispatched silently).
The task that called ``invoke`` (or a handle's task, for ``start``) wakes once, when the
call is resolved, and returns its `Outcome`, after one audit event.

The supervisor's task group holds the pools (every session's task group inside them), the
clock that times every call (`Timers`: the wait for a worker, deadlines, graces,
back-offs), the expiry of indeterminate operations, and the calls started with `start`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Unpack

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from sandbox import SandboxPolicy, Spawner
from sandbox.netproxy.events import NetEvent
from sandbox.netproxy.server import ProxyServer
from supervisor._loop import current_loop
from supervisor.ledger import (
    AlreadyRegistered,
    AuditEvent,
    Compaction,
    Ledger,
    LedgerError,
    LedgerOutcome,
    OperationInfo,
    ReconcileStatus,
    ToolPolicy,
    UnknownTool,
)
from supervisor.ledger.audit import TERMINAL_KINDS
from supervisor.ledger.policy import check_id
from supervisor.workers.call_audit import AuditHub, AuditStream, CallEvent
from supervisor.workers.calls import Call, CallHandle, CallHost, ChunkCallback
from supervisor.workers.config import SupervisorConfig, SupervisorOptions, check_seconds
from supervisor.workers.group import GroupRuntime
from supervisor.workers.groups import DEFAULT_GROUP, ToolGroup, route
from supervisor.workers.local_calls import LedgerLocalAudit
from supervisor.workers.mcp_worker import script_output
from supervisor.workers.outcome import Outcome
from supervisor.workers.pool import Pool, WorkerUnavailable
from supervisor.workers.session import Session, SessionConfig, SessionUnusable
from supervisor.workers.timers import Timers
from supervisor.workers.tool_callbacks import (
    Decoder,
    Encoder,
    ExternalCallback,
    build_callback,
    from_any_loop,
)
from supervisor.workers.tool_inputs import InputChecker
from supervisor.workers.worker_journal import JournalTampered, WorkerJournals
from worker_runtime.protocol.messages import (
    CancelledState,
    Failed,
    JsonPayload,
    Running,
    Status,
    Succeeded,
    ToolSpec,
)

log = logging.getLogger(__name__)

#: Seconds an indeterminate operation's expiry waits past its deadline, so that a call
#: still in its cancel grace or reap is never expired under its own feet.
EXPIRY_SLACK = 1.0
#: The first five arguments of `Supervisor` as given when ``config=`` is.
_SHORTHAND: tuple[Any, ...] = ((), None, 1, 1, None)
SHUTDOWN_TIMEOUT = 10.0
#: Seconds between the starts of two listings of a group's tools that its MCP server
#: asked for with ``tools/list_changed`` (`Supervisor.refresh_tools` is not limited).
RELIST_INTERVAL = 5.0


class SupervisorError(Exception):
    """A supervisor-level refusal: closed, misconfigured, or its audit log failed."""


class DuplicateOperation(SupervisorError):
    """An operation with this tool and idempotency key is still pending."""


class JournalFull(SupervisorError):
    """A group's worker journal holds ``journal_limit`` operations: compact first."""


class Supervisor:
    """Runs tool calls in pooled, sandboxed workers, one `Outcome` per call.

    Configured by a `SupervisorConfig` (``config=``), or by the keyword arguments it is
    made of (`SupervisorConfig.of`): ``groups``, `ToolGroup` values, each with its tools,
    sandbox policy (binds, network allowlist, limits), pool, secrets and overrides (each
    call goes to its tool's group; two groups' workers share nothing); or the one-group
    shorthand for a group named ``default``: ``adapters``: ``MODULE:ATTR`` registries for
    ``python -m worker_runtime`` (their tools are described in a sandbox at start), or
    ``worker_argv``: any program speaking the protocol on fds 3/4, which then needs
    ``tools`` (`ToolPolicy` per tool). ``tools`` also overrides the defaults of described
    tools; ``redactors`` maps a tool to the function its chunks pass. ``on_network``
    hears each connection of a sandbox through the network proxy (`NetEvent`, also in
    the audit log). Use as ``async with``.
    """

    def __init__(
        self,
        adapters: Sequence[str] = (),
        policy: SandboxPolicy | None = None,
        pool_size: int = 1,
        max_in_flight: int = 1,
        worker_argv: Sequence[str] | None = None,
        *,
        config: SupervisorConfig | None = None,
        **options: Unpack[SupervisorOptions],
    ) -> None:
        if config is None:
            config = SupervisorConfig.of(
                adapters, policy, pool_size, max_in_flight, worker_argv, **options
            )
        elif options or (adapters, policy, pool_size, max_in_flight, worker_argv) != _SHORTHAND:
            raise ValueError("give config=SupervisorConfig(...) or the arguments, not both")
        elif not isinstance(config, SupervisorConfig):
            raise TypeError("config must be a SupervisorConfig")
        self.config = config
        self.groups: dict[str, ToolGroup] = {g.name: g for g in config.groups}
        self.acquire_timeout = config.acquire_timeout
        #: None: each group's kind decides (`DEFAULT_CANCEL_GRACE`, an MCP server's less)
        self.cancel_grace = None if config.cancel_grace is None else float(config.cancel_grace)
        self.start_timeout = config.start_timeout
        self.session_lifetime = config.session_lifetime
        self.ping_interval = config.ping_interval
        self.retry_backoff = config.retry_backoff
        self.reconcile_timeout = config.reconcile_timeout
        self.frame_timeout = config.frame_timeout
        journal_dir = config.journal_dir
        if journal_dir is None and config.ledger_path is not None:  # as durable as the ledger
            journal_dir = f"{os.fspath(config.ledger_path)}.workers"
        #: The worker journals' root (made only if a group serves an effectful tool).
        self.journals = WorkerJournals(journal_dir, limit=config.journal_limit)
        self.reconcile_on_start = config.reconcile_on_start
        #: What the start found in flight in a durable ledger, as it was then (the start
        #: reconciles them and expiry ends them, after which the ledger no longer lists
        #: them as indeterminate): their ids and keys, for asking for their outcomes later.
        self.recovered: tuple[OperationInfo, ...] = ()
        on_audit = config.on_audit
        self._audit = AuditHub(config.audit_log, () if on_audit is None else (on_audit,))
        if config.on_network is not None:
            self._audit.add_network_callback(config.on_network)
        self._policies: dict[str, ToolPolicy] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._inputs = InputChecker(())
        self._ledger: Ledger | None = None
        self._host: CallHost | None = None
        self._runtimes: dict[str, GroupRuntime] = {}
        self._home: dict[str, GroupRuntime] = {}  # tool -> its group
        self._spawner: Spawner | None = None
        self._nursery: anyio.abc.TaskGroup | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._state = "new"
        #: Calls admitted and not yet concluded (the close cancels them).
        self._calls: set[Call] = set()
        self._timers = Timers()
        self._timer_scope: anyio.CancelScope | None = None
        self._timer_wake = math.inf
        self._indeterminate: dict[int, float | None] = {}
        #: made in the loop that runs the supervisor (an event belongs to one loop)
        self._expiry_kick: anyio.Event | None = None
        self._live_keys: dict[tuple[str, str], int] = {}
        self._key_of: dict[int, tuple[str, str]] = {}
        self._unsubscribe_keys: Callable[[], None] | None = None
        self._now: Callable[[], float] = anyio.current_time  # the loop's own, once entered
        self._tools_callbacks: list[Callable[[], None]] = []
        self._refreshing: dict[str, bool] = {}  # group -> a listing asked for, not begun
        self._relisted: dict[str, float] = {}  # group -> when its last asked-for listing began

    # -- life -------------------------------------------------------------------------------

    async def __aenter__(self) -> Supervisor:
        if self._state != "new":
            raise SupervisorError("a Supervisor is entered once")
        self._state = "starting"
        self._token = anyio.lowlevel.current_token()
        loop = current_loop()
        self._now = now = loop.now
        self._expiry_kick = anyio.Event()
        spawner = self._spawner = Spawner("sandvisor-supervisor").start()
        nursery = self._nursery = anyio.create_task_group()
        await nursery.__aenter__()
        try:
            proxy = None
            if any(group.policy.allowlist is not None for group in self.groups.values()):
                proxy = await nursery.start(ProxyServer(self._on_network).run)
            runtimes = self._runtimes = {
                name: GroupRuntime(group, spawner, proxy, self.start_timeout)
                for name, group in self.groups.items()
            }
            for runtime in runtimes.values():  # one at a time: a failure says which
                await runtime.describe(self.start_timeout, first=True)
            homes = route({name: rt.policies for name, rt in runtimes.items()})
            self._home = {tool: runtimes[group] for tool, group in homes.items()}
            self._policies = {t: rt.policies[t] for t, rt in self._home.items()}
            if not self._policies:
                raise SupervisorError("the workers serve no tools")
            self._specs = {t: rt.specs[t] for t, rt in self._home.items()}
            self._inputs = InputChecker(self._specs.values())
            config = self.config
            ledger = self._ledger = Ledger(config.max_pending, config.ledger_path, clock=now)
            self._host = CallHost(
                ledger,
                now=now,
                event=loop.event,
                arm=self._arm,
                disarm=self._timers.cancel,
                note_indeterminate=self._note_indeterminate,
                audit=self._audit,
                outdated=self._outdated,
                acquire_timeout=self.acquire_timeout,
                retry_backoff=self.retry_backoff,
            )
            for tool, runtime in self._home.items():
                ledger.register_external_tool(
                    self._policies[tool], redactor=runtime.group.redactors.get(tool)
                )
            recovered = self.recovered = ledger.indeterminate()  # from a durable journal
            for info in recovered:
                self._indeterminate[info.id] = ledger.deadline(info.id)
            for info in ledger.pending():  # their keys stay taken until they end
                self._hold_key(info.tool, info.idempotency_key, info.id)
            for runtime in runtimes.values():
                runtime.open_journal(self.journals)
            ledger.subscribe_compaction(self._forget_journaled)
            base = SessionConfig(
                grants=(),
                start_timeout=self.start_timeout,
                lifetime=self.session_lifetime,
                ping_interval=self.ping_interval,
                frame_timeout=self.frame_timeout,
            )
            margin = 0.0 if self.session_lifetime is None else min(60.0, self.session_lifetime / 10)
            for runtime in runtimes.values():
                await nursery.start(runtime.make_pool(base, margin, self.cancel_grace).run)
                await runtime.discard_first_worker()  # if its pool's first session did not take it
                runtime.on_tools_changed = self._refresh_soon(runtime)
            nursery.start_soon(self._expire_indeterminate)
            await nursery.start(self._run_timers)
            if recovered and self.reconcile_on_start:
                await self._reconcile_recovered([info.id for info in recovered])
        except BaseException:
            nursery.cancel_scope.cancel()
            await nursery.__aexit__(None, None, None)
            with anyio.CancelScope(shield=True):
                for runtime in self._runtimes.values():
                    await runtime.discard_first_worker()
            self._close_resources()
            self._state = "closed"
            raise
        self._state = "running"
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the calls still running (cooperatively), close every worker, and stop.
        Called by ``async with`` on exit (it must run in the task that entered)."""
        if self._state != "running":
            return
        self._state = "closing"
        assert self._nursery is not None
        pools = [runtime.pool for runtime in self._runtimes.values()]
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_TIMEOUT):
            calls = list(self._calls)
            for call in calls:  # every call, whoever awaits it: cooperatively
                call.cancel()
            for call in calls:
                await call.done.wait()
            async with anyio.create_task_group() as group:
                for pool in pools:
                    group.start_soon(pool.aclose)
        self._nursery.cancel_scope.cancel()  # kills whatever the graceful part left
        try:
            await self._nursery.__aexit__(None, None, None)
        finally:
            self._close_resources()
            self._state = "closed"

    def _on_network(self, event: NetEvent) -> None:
        """A connection of a group's sandbox ended: into the audit, the group's secrets
        redacted (a host name or a detail could carry one)."""
        runtime = self._runtimes.get(event.group or "")
        if runtime is not None and runtime.redactor is not None:
            redact = runtime.redactor.text
            event = msgspec.structs.replace(
                event,
                host=None if event.host is None else redact(event.host),
                detail=None if event.detail is None else redact(event.detail),
            )
        self._audit.emit_network(event)

    def add_network_callback(self, callback: Callable[[NetEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every connection of a sandbox through the proxy
        (`NetEvent`, allowed or refused); returns the unsubscriber."""
        return self._audit.add_network_callback(callback)

    def _close_resources(self) -> None:
        if self._spawner is not None:
            self._spawner.close()
        if self._ledger is not None:
            self._ledger.close()
        self.journals.close()
        self._audit.close()

    # -- what a host reads ---------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``new``, ``starting``, ``running``, ``closing`` or ``closed``."""
        return self._state

    @property
    def ledger(self) -> Ledger:
        """The supervisor's ledger: pending and indeterminate operations, the audit chain."""
        if self._ledger is None:
            raise SupervisorError("the supervisor is not started")
        return self._ledger

    @property
    def tools(self) -> dict[str, ToolPolicy]:
        return dict(self._policies)

    @property
    def specs(self) -> dict[str, ToolSpec]:
        """Each tool as its worker describes it: description and input schema."""
        return dict(self._specs)

    @property
    def pool(self) -> Pool:
        """The pool of the only group (with several, `group` gives each one's)."""
        if not self._runtimes:
            raise SupervisorError("the supervisor is not started")
        if len(self._runtimes) > 1:
            raise SupervisorError(
                f"this supervisor serves {len(self._runtimes)} groups; ask sup.group(NAME).pool"
            )
        return next(iter(self._runtimes.values())).pool

    # The one-group arguments, read back (a supervisor with several groups has none).

    @property
    def adapters(self) -> list[str]:
        return list(self._only_group().adapters)

    @property
    def worker_argv(self) -> list[str] | None:
        argv = self._only_group().worker_argv
        return None if argv is None else list(argv)

    @property
    def mcp_server(self) -> list[str] | None:
        server = self._only_group().mcp_server
        return None if server is None else list(server)

    @property
    def tool_prefix(self) -> str:
        return self._only_group().tool_prefix

    @property
    def policy(self) -> SandboxPolicy:
        return self._only_group().policy

    @property
    def pool_size(self) -> int:
        return self._only_group().pool_size

    @property
    def pool_min(self) -> int | None:
        return self._only_group().pool_min

    @property
    def max_in_flight(self) -> int:
        return self._only_group().max_in_flight

    @property
    def max_calls_per_worker(self) -> int:
        return self._only_group().calls_per_worker

    def _only_group(self) -> ToolGroup:
        if len(self.groups) > 1:
            raise SupervisorError(
                f"this supervisor serves {len(self.groups)} groups; read sup.groups[NAME]"
            )
        return next(iter(self.groups.values()))

    def group(self, name: str) -> GroupRuntime:
        """A running group (its `ToolGroup`, tools, pool), by name."""
        runtime = self._runtimes.get(name)
        if runtime is None:
            known = ", ".join(sorted(self.groups)) or "none started"
            raise SupervisorError(f"no group {name!r} (groups: {known})")
        return runtime

    def group_of(self, tool: str) -> str:
        """The name of the group that serves ``tool``."""
        runtime = self._home.get(tool)
        if runtime is None:
            raise SupervisorError(f"no group serves {tool!r}")
        return runtime.name

    @property
    def loop_token(self) -> anyio.lowlevel.EventLoopToken:
        """The token of the event loop the supervisor lives in (for other threads)."""
        if self._token is None:
            raise SupervisorError("the supervisor is not started")
        return self._token

    def tool_callback(
        self,
        tool: str,
        *,
        deadline: float | None = None,
        encode: Encoder | None = None,
        decode: Decoder | None = None,
    ) -> ExternalCallback:
        """An async ``(params, stdin) -> str`` callback for `ScriptedTool.add_tool` that
        runs ``tool`` here; outcomes map to exit statuses (see
        `supervisor.workers.tool_callbacks`)."""
        if deadline is not None:
            check_seconds("deadline", deadline)
        policy = self._policies.get(tool)
        if policy is None:
            raise ValueError(f"the supervisor has no tool {tool!r}")
        if decode is None and self._home[tool].group.mcp_server is not None:
            decode = script_output  # an MCP tool's text answer prints as text
        invoke = from_any_loop(
            self.loop_token,
            lambda tool, value, deadline: self.invoke(tool, value, deadline=deadline),
            lambda tool, value, deadline: self.start(tool, value, deadline=deadline),
        )
        return build_callback(
            tool, policy.format, invoke, deadline=deadline, encode=encode, decode=decode
        )

    def local_audit(self) -> LedgerLocalAudit:
        """The audit for ``ScriptedTool(audit=...)``: each local tool call of its scripts
        takes a slot of this supervisor's ``max_pending`` while it runs (refused, exit 1,
        when none is free) and ends as one ``local_call`` event in the ledger's chain, so
        ``sup.ledger.verify_audit_chain()`` covers the local and the external calls."""
        return LedgerLocalAudit(self.ledger, self.loop_token)

    def audit_events(self, capacity: int = 1024) -> AuditStream:
        """A stream of call audit events (``async for``); it drops events when full."""
        return self._audit.subscribe(capacity)

    def add_audit_callback(self, callback: Callable[[CallEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every call event; returns the unsubscriber."""
        return self._audit.add_callback(callback)

    def add_tools_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (in the supervisor's loop) each time the tools changed: an
        MCP server's ``tools/list_changed`` followed by a new listing that differs (read
        `specs` then); returns the unsubscriber."""
        self._tools_callbacks.append(callback)
        return lambda: self._tools_callbacks.remove(callback)

    # -- tools that change ------------------------------------------------------------------

    def _refresh_soon(self, runtime: GroupRuntime) -> Callable[[], None]:
        """What a group's sessions call when its server says its tools changed: one
        listing at a time per group, at most one per `RELIST_INTERVAL` (each is a fresh
        sandbox: a server that repeats the notification must not keep the host busy), and
        one more if it was said again since the last one began (the last word is heard)."""
        name = runtime.name

        def changed() -> None:
            if self._state != "running" or self._nursery is None:
                return
            if name in self._refreshing:
                self._refreshing[name] = True
                return
            self._refreshing[name] = True
            self._nursery.start_soon(refresh)

        async def refresh() -> None:
            try:
                while self._refreshing.get(name):
                    wait = self._relisted.get(name, -math.inf) + RELIST_INTERVAL
                    if wait > self._now():
                        await anyio.sleep(wait - self._now())  # what is said meanwhile: this one
                    self._refreshing[name] = False  # said from now on: one more
                    self._relisted[name] = self._now()
                    await self.refresh_tools(name)
            finally:
                self._refreshing.pop(name, None)

        return changed

    async def refresh_tools(self, group: str = DEFAULT_GROUP) -> bool:
        """Describe ``group`` again, in a fresh sandbox, and serve what it lists now: new
        tools are registered, gone ones refused, changed schemas checked; the group's
        running sessions (granted the old tools) are retired once their calls end.
        Returns whether anything changed. A listing that fails keeps the old tools."""
        runtime = self.group(group)
        before = (runtime.policies, runtime.specs)
        try:
            await runtime.describe(self.start_timeout)
            policies = {name: rt.policies for name, rt in self._runtimes.items()}
            home = {tool: self._runtimes[g] for tool, g in route(policies).items()}
        except Exception as exc:
            runtime.policies, runtime.specs = before
            log.warning("group %r: listing its tools again failed, keeping them: %s", group, exc)
            return False
        if (runtime.policies, runtime.specs) == before:
            return False
        ledger = self.ledger
        for tool, owner in home.items():
            if tool not in self._policies:
                policy = owner.policies[tool]
                with contextlib.suppress(AlreadyRegistered):  # it was served before
                    ledger.register_external_tool(policy, redactor=owner.group.redactors.get(tool))
        self._home = home
        self._policies = {t: rt.policies[t] for t, rt in home.items()}
        self._specs = {t: rt.specs[t] for t, rt in home.items()}
        self._inputs = InputChecker(self._specs.values())
        runtime.regrant()
        for callback in list(self._tools_callbacks):
            callback()
        return True

    # -- calls ------------------------------------------------------------------------------

    async def invoke(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run one call to its `Outcome`. ``deadline``: seconds from now. ``on_chunk``:
        a quick function called with each (redacted) chunk in order. A cancellation
        of the caller becomes a cooperative ``cancel`` (recorded), then propagates."""
        call = self._admit(tool, value, deadline, on_chunk, idempotency_key)
        call.queue(call.created_at)
        try:  # `_conclude`'s common case inline: one coroutine less per call
            await call.done.wait()
        except BaseException:
            await self._abandon(call)
            raise
        if call.killed_session:
            return await self._conclude(call)
        return self._outcome(call)

    async def start(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> CallHandle:
        """Start a call in the supervisor's nursery; `CallHandle.cancel`/`outcome`."""
        handle = self.prepare(
            tool, value, deadline=deadline, on_chunk=on_chunk, idempotency_key=idempotency_key
        )
        assert self._nursery is not None
        self._nursery.start_soon(self._run_handle, handle)
        await anyio.lowlevel.checkpoint()
        return handle

    def prepare(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> CallHandle:
        """Reserve a call (its refusals raise here) and return its handle without running
        it: `drive` runs it in the caller's own task, where `start` spawns one, which a
        host that already runs each call in a task of its own need not pay for."""
        call = self._admit(tool, value, deadline, on_chunk, idempotency_key)
        assert self._host is not None
        handle = CallHandle(call, self._host.event())
        call.queue(call.created_at)
        return handle

    async def drive(self, handle: CallHandle) -> Outcome:
        """Run a `prepare`d call to its `Outcome` in this task. ``handle.cancel()`` from
        another task (and `aclose`) ends it cooperatively with its outcome; a cancellation
        of this task becomes a cooperative ``cancel`` too, then propagates."""
        await self._run_handle(handle)
        return await handle.outcome()

    async def _run_handle(self, handle: CallHandle) -> None:
        try:
            await self._conclude(handle.call)
        except Exception as exc:  # a bug: surface it through the handle, keep the rest
            log.exception("call %s failed inside the supervisor", handle.op_id)
            handle.settle(exc)
        else:
            handle.settle()

    def _admit(
        self,
        tool: str,
        value: Any,
        deadline: float | None,
        on_chunk: ChunkCallback | None,
        idempotency_key: str | None,
    ) -> Call:
        """Reserve the ledger operation (raises its refusals: unknown tool, bad input,
        pending limit) with the deadline armed from now."""
        if self._state != "running":
            raise SupervisorError(f"the supervisor is {self._state}")
        if self._audit.failure is not None:
            raise SupervisorError(self._audit.failure)
        if deadline is not None:
            check_seconds("deadline", deadline)
        host = self._host
        assert host is not None
        ledger = host.ledger
        inputs = self._inputs
        if tool in inputs.checked:
            inputs.check(tool, value)
        journal = self._home[tool].journal if tool in self._home else None
        if journal is not None and journal.full and tool in journal.effectful:
            raise JournalFull(
                f"the worker journal of group {journal.name!r} holds {journal.operations} "
                f"operations (journal_limit {journal.limit}): compact the ledger "
                "(sup.compact()) or raise the limit"
            )
        if idempotency_key is not None:
            check_id("idempotency_key", idempotency_key)
            held = self._live_keys.get((tool, idempotency_key))
            if held is not None:
                raise DuplicateOperation(
                    f"operation {held} of {tool!r} with key {idempotency_key!r} is pending; "
                    "reconcile or resolve it first"
                )
        now = self._now()
        policy = self._policies.get(tool)
        if policy is None:  # also one the ledger knows that is no longer served
            raise UnknownTool(f"tool {tool!r} is not served")
        op_id = ledger.start(tool, value, deadline=deadline, idempotency_key=idempotency_key)
        if idempotency_key is not None:
            self._hold_key(tool, idempotency_key, op_id)
        call = Call(
            host,
            self._home[tool].pool,
            op_id,
            tool,
            value,
            deadline=(
                None if deadline is None and policy.deadline is None else ledger.deadline(op_id)
            ),
            max_attempts=policy.max_attempts,
            idempotency_key=idempotency_key,
            on_chunk=on_chunk,
            created_at=now,
        )
        self._calls.add(call)
        return call

    async def _conclude(self, call: Call) -> Outcome:
        """Wait for the call's end, then its `Outcome` and audit event. A cancellation of
        the waiter becomes the call's cooperative cancel (shielded: the grace, then the
        kill), then propagates."""
        try:
            await call.done.wait()
            if call.killed_session:
                await call.wait_reaped()
        except BaseException:
            await self._abandon(call)
            raise
        return self._outcome(call)

    async def _abandon(self, call: Call) -> None:
        """The call's waiter was cancelled: the call's cooperative cancel, shielded (the
        grace, then the kill), to its outcome (and audit event)."""
        with anyio.CancelScope(shield=True):
            call.cancel()
            await call.done.wait()
            await call.wait_reaped()
            self._outcome(call)

    def _outcome(self, call: Call) -> Outcome:
        if call.outcome is not None:
            return call.outcome
        self._calls.discard(call)
        ended = call.ended_at  # the reader's clock reading of the end, if it saw one
        outcome = call.build_outcome(self._now() if ended is None else ended)
        if self._audit.active:
            self._audit.emit(CallEvent.of(outcome, time=time.time(), ledger_head=call.ledger_head))
        return outcome

    def _outdated(self, tool: str, session: Session) -> bool:
        """Whether ``session`` was granted the tools of an earlier listing of ``tool``'s
        group (a call it refuses as ``unknown_tool`` then retires it, and goes on)."""
        runtime = self._home.get(tool)
        return runtime is not None and runtime.outdated(session)

    # -- the clock of every call -------------------------------------------------------------

    def _arm(self, call: Call, when: float) -> None:
        """Look at ``call`` at ``when`` (its `Call.on_timer`); wake the clock sooner if
        this is now the earliest."""
        self._timers.at(when, call)
        if when < self._timer_wake:
            self._timer_wake = when
            scope = self._timer_scope
            if scope is not None:
                scope.deadline = when

    async def _run_timers(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The one task that times every call: it sleeps until the earliest entry and
        hands each call whose time came its `Call.on_timer`."""
        timers = self._timers
        now = self._now
        task_status.started()
        while True:
            wake = self._timer_wake = timers.next_at()
            with anyio.CancelScope(deadline=wake) as scope:
                self._timer_scope = scope
                await anyio.sleep_forever()
            self._timer_scope = None
            self._timer_wake = -math.inf  # an arm now must not touch the spent scope
            moment = now()
            for call in timers.due(moment):
                try:
                    call.on_timer(moment)
                except Exception:
                    log.exception("a call's timer failed")

    # -- indeterminate operations -----------------------------------------------------------

    def _note_indeterminate(self, call: Call) -> None:
        self._indeterminate[call.op_id] = call.deadline
        if self._expiry_kick is not None:
            self._expiry_kick.set()

    async def _expire_indeterminate(self) -> None:
        """Expire indeterminate operations once their deadline (plus slack) has passed."""
        while True:
            deadlines = [d for d in self._indeterminate.values() if d is not None]
            wake = min(deadlines) + EXPIRY_SLACK if deadlines else math.inf
            assert self._expiry_kick is not None
            with anyio.CancelScope(deadline=wake):
                await self._expiry_kick.wait()
            self._expiry_kick = anyio.Event()
            now = self._now()
            if now >= wake:
                self.ledger.expire_timed_out(before=now - EXPIRY_SLACK)
            for op_id in list(self._indeterminate):
                try:
                    if self.ledger.outcome(op_id) is None:
                        continue
                except LedgerError:
                    pass
                del self._indeterminate[op_id]

    async def reconcile(self, op_id: int) -> LedgerOutcome | None:
        """Ask a fresh worker about an operation (a ``reconcile`` frame with its
        idempotency key) and apply the answer: the ledger outcome, or None while it is
        still running or unknown. Never re-dispatches the operation."""
        ledger = self.ledger
        done = ledger.outcome(op_id)
        if done is not None:
            return done
        info = ledger.status(op_id)
        home = self._home.get(info.tool)
        if home is None:  # recovered from a journal, and no group serves it now
            raise SupervisorError(f"no group serves {info.tool!r} to reconcile operation {op_id}")
        pool = home.pool
        session = await pool.acquire(self._now() + self.acquire_timeout)
        try:
            status = await session.reconcile(
                info.tool, info.idempotency_key, self.reconcile_timeout, attempt=info.attempt
            )
        finally:
            pool.release(session)
        return ledger.reconcile(op_id, _reconcile_status(status))

    async def _reconcile_recovered(self, op_ids: list[int]) -> None:
        """On start, ask a fresh worker about every operation a durable ledger recovered
        in flight, within ``start_timeout``; what cannot be settled stays indeterminate
        (reconcile it later, or let it expire), each failure one line in the log."""
        with anyio.move_on_after(self.start_timeout) as scope:
            for op_id in op_ids:
                try:
                    await self.reconcile(op_id)
                except (
                    SupervisorError,
                    JournalTampered,
                    LedgerError,
                    SessionUnusable,
                    WorkerUnavailable,
                ) as exc:
                    log.warning("recovered operation %s stays unresolved: %s", op_id, exc)
        if scope.cancelled_caught:
            log.warning(
                "reconciling %d recovered operations took longer than start_timeout; "
                "the rest stay indeterminate (sup.reconcile(op_id))",
                len(op_ids),
            )

    def compact(self, *, vacuum: bool = False) -> Compaction:
        """Compact the durable ledger (`Ledger.compact`) and, with it, the workers'
        journals: the entries of every operation it removed go too."""
        return self.ledger.compact(vacuum=vacuum)

    def _forget_journaled(self, compaction: Compaction) -> None:
        """The ledger removed ended operations: so do the groups' journals (a key that a
        pending operation still holds is kept)."""
        live = {(info.tool, info.idempotency_key) for info in self.ledger.pending()}
        keys = [key for key in compaction.removed if key not in live]
        for runtime in self._runtimes.values():
            if runtime.journal is not None:
                runtime.journal.forget(keys)

    def _hold_key(self, tool: str, key: str, op_id: int) -> None:
        """A caller's idempotency key is taken until its operation ends in the ledger
        (however it ends: here, in an expiry sweep, by the host). The ledger's audit
        events say when; the supervisor listens only while it holds a key, so that calls
        without one cost no listener call per transition."""
        self._live_keys[(tool, key)] = op_id
        self._key_of[op_id] = (tool, key)
        if self._unsubscribe_keys is None:
            assert self._ledger is not None
            self._unsubscribe_keys = self._ledger.subscribe_audit(self._on_ledger_event)

    def _on_ledger_event(self, event: AuditEvent) -> None:
        if event.kind in TERMINAL_KINDS:
            key = self._key_of.pop(event.op_id, None)
            if key is not None:
                self._live_keys.pop(key, None)
                if not self._key_of and self._unsubscribe_keys is not None:
                    self._unsubscribe_keys()
                    self._unsubscribe_keys = None


def _reconcile_status(status: Status) -> ReconcileStatus:
    if isinstance(status, Succeeded):
        payload = status.payload
        fmt: Literal["text", "json"] = "json" if isinstance(payload, JsonPayload) else "text"
        return ReconcileStatus.succeeded(payload.value, fmt)
    if isinstance(status, Failed):
        return ReconcileStatus.failed(status.message)
    if isinstance(status, CancelledState):
        return ReconcileStatus.cancelled()
    if isinstance(status, Running):
        return ReconcileStatus.running()
    return ReconcileStatus.unknown()
