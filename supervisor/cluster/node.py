"""`NodeSupervisor`: the Ray actor of one node, owning one `AsyncioSupervisor`.

Ray runs an async actor's methods (and its ``__init__``) on one asyncio loop, the loop
the supervisor lives on. The actor starts its supervisor as soon as it is made, and again
whenever Ray restarts it: it first checks that the node can sandbox (the checks of
``sandvisor doctor``, an error naming the node), removes what a dead owner left on the
node (cgroups of a process that was SIGKILLed, as ``ray.kill`` does), opens the node's
durable ledger, whose supervisor asks a fresh worker about every operation it still holds
in flight (``reconcile_on_start``); what stays unknown expires at its deadline.

A call arrives as a `CallRequest` (a row: see wire) with a caller-made ``call_id`` and runs
in the Ray task that carried it (no task of its own); ``cancel`` names calls by it, so the
caller cancels through the node (cooperatively) and still receives the call's real
outcome from the call itself. A cancel that overtakes its call (both queued in Ray)
is remembered and applied when the call arrives. Ray's own task cancellation
(``ray.cancel``) is turned into the same cooperative cancel before it propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from sandbox import SandboxUnavailable
from sandbox.cgroups import collect_orphans, detect_layout
from sandbox.gate import require
from supervisor.cluster.errors import NodeUnfit
from supervisor.cluster.niceness import niceness, set_niceness
from supervisor.cluster.outcomes import from_ledger
from supervisor.cluster.waiting import to_the_end
from supervisor.cluster.wire import (
    CallRequest,
    NodeConfig,
    NodeInfo,
    Row,
    from_row,
    pack_outcomes,
)
from supervisor.hosting import AsyncioSupervisor
from supervisor.ledger import LedgerError
from supervisor.workers.calls import CallHandle
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import SHUTDOWN_TIMEOUT, SupervisorError

log = logging.getLogger(__name__)

#: The shortest deadline a call is given on arrival: one whose caller's instant has passed
#: still goes through the ledger, which ends it ``timed_out`` without dispatching it.
MIN_DEADLINE = 1e-6
#: Seconds a cancel for a call that has not arrived (or has ended) is remembered.
EARLY_CANCEL_SECONDS = 600.0
#: Idempotency keys whose outcome the actor can give later (the most recent ones).
KEYS_KEPT = 65_536


def default_ledger_dir() -> str:
    """``$XDG_STATE_HOME/sandvisor/ray`` (``~/.local/state/sandvisor/ray``) on the node."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return os.path.join(state, "sandvisor", "ray")


def ledger_file(ledger_dir: str | None, name: str, node_id: str) -> str:
    """``<namespace>.<name>.<node id>.sqlite3``: the node's own, so two nodes whose
    ledger directories are one (two raylets on a machine, a shared home) never open one
    file (the second would find it locked); a restarted actor, on the same node, opens
    the file its predecessor left."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{name}.{node_id}")
    return os.path.join(ledger_dir or default_ledger_dir(), f"{safe}.sqlite3")


class NodeSupervisor:
    """One node's supervisor, as a Ray async actor (made by `RaySupervisor`)."""

    def __init__(self, config: NodeConfig) -> None:
        self._config = config
        self._sup: AsyncioSupervisor | None = None
        self._calls: dict[str, CallHandle] = {}  # running here, by call id
        self._early: dict[str, float] = {}  # call id -> until when its cancel is kept
        #: key -> the call's outcome once it ended here, or (tool, op id) of an operation
        #: recovered from the ledger
        self._keys: OrderedDict[str, tuple[str, int] | Outcome] = OrderedDict()
        self._loop = asyncio.get_running_loop()  # Ray runs an async actor's __init__ on it
        self._started = self._loop.create_task(self._start(), name="sandvisor-node-start")

    # -- life -----------------------------------------------------------------------------

    async def _start(self) -> NodeInfo:
        config = self._config
        node_id, hostname, ip = _identity()
        label = f"{hostname} ({ip}, Ray node {node_id[:12]})"
        if config.niceness is not None:  # before any thread or sandbox of the supervisor
            set_niceness(config.niceness, label)
        try:
            require(config.policy)
        except SandboxUnavailable as exc:
            raise NodeUnfit(f"node {label} cannot sandbox: {exc}") from None
        swept = _sweep()
        path = ledger_file(config.ledger_dir, config.name, node_id) if config.durable else None
        sup = AsyncioSupervisor(
            config.adapters, config.policy, config.pool_size, ledger_path=path, **config.options
        )
        try:
            if path is not None:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            await sup.__aenter__()
        except Exception as exc:
            raise NodeUnfit(f"node {label}: the supervisor did not start: {exc}") from None
        self._sup = sup
        # as the ledger held them: its start reconciled them since, expiry may end them
        recovered = sup.supervisor.recovered
        for info in recovered:
            self._remember(info.idempotency_key, (info.tool, info.id))
        return NodeInfo(
            node_id=node_id,
            hostname=hostname,
            ip=ip,
            pid=os.getpid(),
            ledger_path=path or "",
            tools=sorted(sup.tools),
            recovered=len(recovered),
            swept=swept,
            niceness=niceness(),
        )

    async def ready(self) -> NodeInfo:
        """Where this actor runs and what its start found (raises `NodeUnfit`)."""
        return await asyncio.shield(self._started)

    async def _supervisor(self) -> AsyncioSupervisor:
        if self._sup is None:
            await asyncio.shield(self._started)
            assert self._sup is not None
        return self._sup

    async def close(self) -> None:
        """Cancel every call cooperatively and close every worker (the supervisor's
        ``aclose``); each call's caller receives its outcome."""
        with contextlib.suppress(Exception):
            await asyncio.shield(self._started)
        if self._sup is not None:
            await to_the_end(self._sup.aclose())

    def __ray_shutdown__(self) -> None:
        """Ray's graceful exit (every handle gone, the owner ended, ``__ray_terminate__``):
        Ray calls this from the actor's main thread while the loop still runs; close the
        supervisor there first. Not called for ``ray.kill`` or a crash: then the sandboxes
        die with the process, and the next actor on the node removes their cgroups."""
        loop = self._loop
        if threading.current_thread() is not threading.main_thread() or not loop.is_running():
            return  # the process exits anyway and takes the sandboxes with it
        closing = asyncio.run_coroutine_threadsafe(self.close(), loop)
        with contextlib.suppress(Exception):
            closing.result(SHUTDOWN_TIMEOUT + 5)

    # -- calls ----------------------------------------------------------------------------

    async def run(self, row: Row) -> bytes | list[Outcome | BaseException]:
        """One call (a `CallRequest` as a row) to its outcome, packed (`pack_outcomes`);
        a refusal raises, as from the supervisor."""
        return pack_outcomes([await self._call(from_row(row), None)])

    async def stream(self, row: Row) -> AsyncIterator[str | Outcome]:
        """One call's chunks as they come, then its `Outcome` (a Ray streaming generator)."""
        request = from_row(row)
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        call = asyncio.ensure_future(self._call(request, queue.put_nowait))
        call.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (chunk := await queue.get()) is not None:
                yield chunk
            yield call.result()
        finally:
            if not call.done():  # Ray cancelled the stream, or nobody reads it any more
                await self.cancel([request.call_id])
                with contextlib.suppress(Exception):
                    await to_the_end(call)

    async def run_many(self, rows: list[Row]) -> bytes | list[Outcome | BaseException]:
        """A batch, all at once: each call's outcome, or the refusal it raised (packed)."""
        calls = (self._call(from_row(row), None) for row in rows)
        return pack_outcomes(await asyncio.gather(*calls, return_exceptions=True))

    async def _call(
        self, request: CallRequest, on_chunk: Callable[[str], object] | None
    ) -> Outcome:
        """Run the call in this task (no task of its own): ``cancel`` reaches it through
        its handle; Ray's cancellation of this task cancels it cooperatively, waits for
        its end, then propagates."""
        sup = (self._sup or await self._supervisor()).supervisor
        call_id, key = request.call_id, request.idempotency_key
        if call_id in self._calls:
            raise SupervisorError(f"call {call_id!r} is already running on this node")
        deadline = None
        if request.deadline_at is not None:  # the caller's wall clock: Ray's queue counted
            deadline = max(request.deadline_at - time.time(), MIN_DEADLINE)
        handle = sup.prepare(
            request.tool, request.value, deadline=deadline, on_chunk=on_chunk,
            idempotency_key=key,
        )  # fmt: skip
        self._calls[call_id] = handle
        try:
            if self._early and self._early.pop(call_id, None) is not None:
                handle.request_cancel()  # its cancel came first
            outcome = await sup.drive(handle)
        finally:
            del self._calls[call_id]
        self._remember(key, outcome)
        return outcome

    async def cancel(self, call_ids: list[str]) -> None:
        """Cancel these calls cooperatively and wait for their ends (their outcomes go to
        their own callers). A call not here yet is cancelled when it arrives."""
        now = time.monotonic()
        for call_id, until in list(self._early.items()):
            if until <= now:
                del self._early[call_id]
        handles = []
        for call_id in call_ids:
            handle = self._calls.get(call_id)
            if handle is None:  # not arrived, or ended already
                self._early[call_id] = now + EARLY_CANCEL_SECONDS
            else:
                handles.append(handle)
        await asyncio.gather(*(to_the_end(h.cancel()) for h in handles))

    # -- outcomes by key --------------------------------------------------------------------

    def _remember(self, key: str, entry: tuple[str, int] | Outcome) -> None:
        self._keys[key] = entry
        self._keys.move_to_end(key)
        while len(self._keys) > KEYS_KEPT:
            self._keys.popitem(last=False)

    async def outcome(self, key: str) -> Outcome | None:
        """The outcome of the call with this idempotency key: its own when it ended here;
        for an indeterminate one (or one recovered from the ledger after a restart), the
        ledger's verdict once it was reconciled or expired (``indeterminate`` until then);
        None if this node does not know the key or the call still runs."""
        sup = await self._supervisor()
        entry = self._keys.get(key)
        if entry is None:
            return None
        if isinstance(entry, Outcome):
            if entry.status != "indeterminate" or entry.op_id is None:
                return entry
            tool, op_id = entry.tool, entry.op_id  # the ledger may have a verdict since
        else:
            tool, op_id = entry
        ledger = sup.supervisor.ledger
        try:
            verdict = ledger.outcome(op_id)
        except LedgerError:
            return None
        if verdict is None and all(info.id != op_id for info in ledger.indeterminate()):
            return None  # still running
        return from_ledger(tool, op_id, key, verdict)


def _identity() -> tuple[str, str, str]:
    """This node's Ray id, host name and address."""
    import ray
    from ray.util import get_node_ip_address

    ip: str = get_node_ip_address()  # type: ignore[no-untyped-call]
    return ray.get_runtime_context().get_node_id(), socket.gethostname(), ip


def _sweep() -> list[str]:
    """Remove the cgroups (and kill what is left in them) of sandbox hosts that died
    without cleaning up: an earlier actor SIGKILLed by ``ray.kill``, whose lifeline Ray
    killed with it. Hosts still alive are left alone."""
    try:
        return collect_orphans(detect_layout(), again=True)
    except (OSError, SandboxUnavailable) as exc:  # no cgroups here: nothing to sweep
        log.info("no cgroup sweep: %s", exc)
        return []
