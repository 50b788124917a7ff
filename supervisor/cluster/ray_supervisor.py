"""`RaySupervisor`: the asyncio supervisor's surface, over every node of a Ray cluster.

```python
async with RaySupervisor(adapters=["mypkg.tools:registry"], pool_size=4) as sup:
    out = await sup.invoke("text.upper", "hi", deadline=2.0, on_chunk=print)
```

One named async actor per node (`NodeSupervisor`, pinned to its node), each owning one
`AsyncioSupervisor` with a durable ledger on that node. A call goes to the node with the
fewest of this supervisor's calls in flight. The actors are made with
``max_task_retries=0``: Ray never sends a call twice, so a call whose node was lost under
it ends ``indeterminate`` (kill reason ``node_lost``) and is never retried; and with
``max_restarts=-1``: Ray restarts a lost actor on its node, which then recovers its
ledger and reconciles or expires what was in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from types import ModuleType, TracebackType
from typing import Any, TypeVar

import msgspec

from sandbox import SandboxPolicy
from supervisor.cluster.errors import ClusterError
from supervisor.cluster.niceness import advice, check_niceness
from supervisor.cluster.outcomes import node_lost, undispatched
from supervisor.cluster.routing import Node, NoNode, Router
from supervisor.cluster.waiting import to_the_end
from supervisor.cluster.wire import (
    Call,
    CallRequest,
    NodeConfig,
    NodeInfo,
    deadline_at,
    to_row,
    unpack_outcomes,
)
from supervisor.ledger import UnknownTool
from supervisor.ledger.policy import check_id
from supervisor.workers.calls import ChunkCallback
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import SHUTDOWN_TIMEOUT, DuplicateOperation, Supervisor

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Calls one node's actor runs at once (Ray's bound on concurrent methods of an actor).
MAX_CONCURRENCY = 10_000
#: Seconds a probe of a suspect node waits for its restarted actor before the next
#: suspect node is probed (each is probed in turn until one answers).
PROBE_WAIT = 1.0
#: Seconds `aclose` gives each node to close its supervisor before its actor is killed.
CLOSE_TIMEOUT = SHUTDOWN_TIMEOUT + 5


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ClusterError(
            "Ray is not installed: pip install 'sandvisor[ray]' (on every node)"
        ) from None
    return ray


class RaySupervisor:
    """The `AsyncioSupervisor`'s surface over a Ray cluster: ``async with``, then await.

    Takes the `Supervisor`'s arguments (checked here, at once), and:
    ``address``: the cluster (``ray.init(address=...)``) if Ray is not initialised yet;
    ``name``: names the actors (``NAME:<node id>``) and their ledgers (two supervisors
    with the same name cannot run at once in a namespace); ``namespace``: Ray's;
    ``ledger_dir``: the directory of each node's durable ledger (default
    ``~/.local/state/sandvisor/ray`` on the node); ``durable=False``: in-memory ledgers
    (faster, but a restarted actor knows nothing of what was in flight);
    ``batch_size``: calls per Ray task in `invoke_many`; ``niceness``: the nice value each
    actor sets for itself and its sandboxes at start (Ray runs them at 15; None leaves
    Ray's, and a node above 0 is logged with the fix).
    """

    def __init__(
        self,
        adapters: Sequence[str] = (),
        policy: SandboxPolicy | None = None,
        pool_size: int = 1,
        *,
        address: str | None = None,
        name: str = "sandvisor",
        namespace: str = "sandvisor",
        ledger_dir: str | None = None,
        durable: bool = True,
        batch_size: int = 100,
        niceness: int | None = None,
        **options: Any,
    ) -> None:
        if isinstance(adapters, str):
            adapters = [adapters]
        if "ledger_path" in options:
            raise ValueError("each node keeps its own ledger: give ledger_dir=, not ledger_path=")
        if "on_audit" in options:
            raise ValueError("on_audit would run on the nodes: give audit_log= (on each node)")
        local = {k: v for k, v in options.items() if k != "audit_log"}  # a node's path
        checked = Supervisor(adapters, policy, pool_size, **local)  # bad arguments fail here
        self._acquire_timeout = checked.acquire_timeout
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be an int >= 1")
        self.address = address
        self.name = name
        self.namespace = namespace
        self.batch_size = batch_size
        self._config = NodeConfig(
            adapters=list(adapters),
            policy=policy if policy is not None else SandboxPolicy(),
            pool_size=pool_size,
            options=options,
            ledger_dir=ledger_dir,
            durable=durable,
            name=f"{namespace}.{name}",
            niceness=check_niceness(niceness),
        )
        self._router: Router[Any] | None = None
        self._infos: dict[str, NodeInfo] = {}
        self._tools: frozenset[str] = frozenset()
        self._live_keys: set[str] = set()
        self._started: set[asyncio.Task[Outcome]] = set()  # calls of handles, for `aclose`
        self._call_prefix = f"{uuid.uuid4().hex[:16]}-"  # call ids: this prefix, a number
        self._call_numbers = itertools.count()
        self._state = "new"

    # -- life -----------------------------------------------------------------------------

    async def __aenter__(self) -> RaySupervisor:
        if self._state != "new":
            raise ClusterError("a RaySupervisor is entered once")
        ray = _ray()
        self._state = "starting"
        if not ray.is_initialized():
            ray.init(address=self.address)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from supervisor.cluster.node import NodeSupervisor

        actor_class = ray.remote(NodeSupervisor)
        actors: dict[str, Any] = {}
        try:
            for node in ray.nodes():
                if not node.get("Alive"):
                    continue
                node_id = node["NodeID"]
                options = {
                    "name": f"{self.name}:{node_id}",
                    "namespace": self.namespace,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
                    "max_restarts": -1,  # a lost actor comes back on its node, ledger and all
                    "max_task_retries": 0,  # and Ray never sends a call twice
                    "max_concurrency": MAX_CONCURRENCY,
                    "num_cpus": 0,  # its sandboxes are bounded by the policy, not by Ray
                }
                try:
                    actors[node_id] = actor_class.options(**options).remote(self._config)
                except ValueError as exc:  # the name is taken
                    raise ClusterError(
                        f"a RaySupervisor named {self.name!r} already runs in namespace "
                        f"{self.namespace!r} ({exc}); give another name="
                    ) from None
            if not actors:
                raise ClusterError("the Ray cluster has no live node")
            ready = await asyncio.gather(
                *(actor.ready.remote() for actor in actors.values()), return_exceptions=True
            )
            failures = [_unwrap(r) for r in ready if isinstance(r, BaseException)]
            if failures:
                raise failures[0]
        except BaseException:
            for actor in actors.values():
                ray.kill(actor, no_restart=True)
            self._state = "closed"
            raise
        infos = [r for r in ready if isinstance(r, NodeInfo)]
        if self._config.niceness is None:
            for info in infos:
                if (warning := advice(info.label, info.niceness)) is not None:
                    log.warning("%s", warning)
        self._infos = {info.node_id: info for info in infos}
        self._tools = frozenset(t for info in infos for t in info.tools)
        self._router = Router([Node(i.node_id, actors[i.node_id], i.label) for i in infos])
        self._state = "running"
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every node's supervisor (its calls cancelled cooperatively, each caller
        gets its outcome), then end the actors. Bounded: a node that does not answer
        within `CLOSE_TIMEOUT` is killed all the same (its sandboxes die with it)."""
        if self._state != "running":
            return
        self._state = "closing"
        assert self._router is not None
        ray = _ray()
        nodes = [n for n in self._router.nodes if not n.dead]

        async def close_all() -> None:
            closing = asyncio.gather(
                *(n.actor.close.remote() for n in nodes), return_exceptions=True
            )
            try:
                await asyncio.wait_for(closing, CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("a node did not close within %s s; its actor is killed", CLOSE_TIMEOUT)
            if self._started:
                await asyncio.wait(list(self._started), timeout=CLOSE_TIMEOUT)

        try:
            await to_the_end(close_all())
        finally:
            for node in nodes:
                ray.kill(node.actor, no_restart=True)
            self._state = "closed"

    # -- what a caller reads -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def tools(self) -> frozenset[str]:
        """The tools the nodes serve."""
        self._check_running()
        return self._tools

    @property
    def nodes(self) -> list[NodeInfo]:
        """The nodes, as their actors reported at start."""
        return list(self._infos.values())

    def _check_running(self) -> Router[Any]:
        if self._state != "running" or self._router is None:
            raise ClusterError(f"the RaySupervisor is {self._state}")
        return self._router

    # -- calls ----------------------------------------------------------------------------------

    def _request(
        self, tool: str, value: Any, deadline: float | None, idempotency_key: str | None
    ) -> CallRequest:
        """Refusals that need no node (unknown tool, a bad deadline or key, a key of this
        supervisor still in flight); the rest are the node's."""
        self._check_running()
        if tool not in self._tools:
            raise UnknownTool(f"unknown tool {tool!r}")
        at = deadline_at(deadline)
        if idempotency_key is None:
            idempotency_key = f"ray-{uuid.uuid4().hex}"
        else:
            check_id("idempotency_key", idempotency_key)
            if idempotency_key in self._live_keys:
                raise DuplicateOperation(
                    f"a call of this supervisor with key {idempotency_key!r} is in flight"
                )
        return CallRequest(
            call_id=f"{self._call_prefix}{next(self._call_numbers):x}",
            tool=tool,
            value=value,
            deadline_at=at,
            idempotency_key=idempotency_key,
        )

    async def invoke(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run one call on the least loaded node to its `Outcome`. ``deadline``: seconds
        from now, by this machine's wall clock (time queued in Ray counts). ``on_chunk``
        runs in this loop with each chunk as it comes. Cancelling the awaiting task
        cancels the call cooperatively on its node, waits for its end, then propagates."""
        request = self._request(tool, value, deadline, idempotency_key)
        router = self._router
        assert router is not None
        if on_chunk is None:
            node = router.ready()
            if node is not None:  # the common case: no probe, no stream, no task of its own
                return await self._run_here(node, request)
        placed = _Placed()
        call = self._launch(self._consume(request, placed, on_chunk), [request])
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            if call.done():
                raise
            await to_the_end(self._cancel(placed, [request], call))
            await to_the_end(call)
            raise

    async def start(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> RayCallHandle:
        """Start a call; the handle's ``cancel`` and ``outcome`` (cancelling a wait for
        the outcome leaves the call running). ``on_chunk`` runs in this loop as chunks
        come. An unknown tool raises here; the node's refusals from ``outcome``."""
        request = self._request(tool, value, deadline, idempotency_key)
        placed = _Placed()
        call = self._launch(self._consume(request, placed, on_chunk), [request])
        self._started.add(call)
        call.add_done_callback(self._started.discard)
        await asyncio.sleep(0)
        return RayCallHandle(request, placed, call, lambda: self._cancel(placed, [request], call))

    async def invoke_many(
        self, calls: Iterable[Call | tuple[str, Any]], *, return_exceptions: bool = False
    ) -> list[Outcome | BaseException]:
        """Run a batch, `batch_size` calls per Ray task, each task to the least loaded
        node; the outcomes in order. A refused call raises its refusal once every call
        has ended (or, with ``return_exceptions``, stands in the list, as with
        ``asyncio.gather``). Cancelling the awaiting task cancels every call still
        running, cooperatively, waits for their ends, then propagates."""
        requests: list[CallRequest] = []
        for call in calls:
            if not isinstance(call, Call):
                call = Call(tool=call[0], value=call[1])
            requests.append(
                self._request(call.tool, call.value, call.deadline, call.idempotency_key)
            )
        parts = []
        for first in range(0, len(requests), self.batch_size):
            batch = requests[first : first + self.batch_size]
            placed = _Placed()
            parts.append((placed, batch, self._launch(self._consume_batch(batch, placed), batch)))
        together = asyncio.gather(*(task for _, _, task in parts))
        try:
            results = await asyncio.shield(together)
        except asyncio.CancelledError:
            if together.done():
                raise
            running = [(p, b, t) for p, b, t in parts if not t.done()]
            await to_the_end(asyncio.gather(*(self._cancel(p, b, t) for p, b, t in running)))
            await to_the_end(together)
            raise
        flat = [result for batch_results in results for result in batch_results]
        if not return_exceptions:
            for result in flat:
                if isinstance(result, BaseException):
                    raise result
        return flat

    async def outcome(self, idempotency_key: str) -> Outcome | None:
        """The outcome of the call with this key, from whichever node ran it: the one its
        caller got, or the node ledger's verdict on a call its node lost (status
        ``indeterminate`` until it is reconciled or expires); None if no node knows the
        key or the call still runs."""
        router = self._check_running()
        check_id("idempotency_key", idempotency_key)
        nodes = [n for n in router.nodes if not n.dead]
        answers = await asyncio.gather(
            *(n.actor.outcome.remote(idempotency_key) for n in nodes), return_exceptions=True
        )
        found = [a for a in answers if isinstance(a, Outcome)]
        found.sort(key=lambda o: o.status == "indeterminate")  # a verdict first
        return found[0] if found else None

    # -- the hop ------------------------------------------------------------------------------

    async def _run_here(self, node: Node[Any], request: CallRequest) -> Outcome:
        """One call on a node that needs no probe, in the caller's task (a task of its own
        and a shield cost two more turns of the loop per call). A cancellation of the
        caller cancels the call cooperatively on its node, waits for its end, then
        propagates, as `invoke` promises."""
        assert self._router is not None
        key = request.idempotency_key
        self._live_keys.add(key)
        self._router.started(node)
        try:
            ref = node.actor.run.remote(to_row(request))
            try:
                return await self._result(node, request, ref)
            except asyncio.CancelledError:
                await to_the_end(self._cancel_on(node, [request]))
                with contextlib.suppress(Exception):
                    await to_the_end(self._result(node, request, ref))
                raise
        finally:
            self._router.ended(node)
            self._live_keys.discard(key)

    async def _result(self, node: Node[Any], request: CallRequest, ref: Any) -> Outcome:
        """The outcome of one call sent to ``node`` (``ref``): its own, ``node_lost``, or
        the node's refusal raised."""
        ray = _ray()
        try:
            packed = await ref
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
            return self._lost(node, request, exc)
        except ray.exceptions.RayTaskError as exc:
            raise _unwrap(exc) from None
        assert self._router is not None
        self._router.answered(node)
        outcome = unpack_outcomes(packed)[0]
        assert isinstance(outcome, Outcome)
        return outcome

    def _launch(self, work: Coroutine[Any, Any, T], requests: list[CallRequest]) -> asyncio.Task[T]:
        """Run a call (or a batch) as a task; its keys are this supervisor's until it ends."""
        keys = [r.idempotency_key for r in requests]
        self._live_keys.update(keys)
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda _: self._live_keys.difference_update(keys))
        return task

    async def _place(self, requests: list[CallRequest], placed: _Placed) -> Outcome | None:
        """Choose the node (the least loaded; a suspect one only once its restarted actor
        answers a probe). None once placed; else how the calls end without a node:
        cancelled meanwhile, out of time, or no node ready within ``acquire_timeout``."""
        ray = _ray()
        router = self._check_running()
        first = requests[0]
        limit = time.monotonic() + self._acquire_timeout
        deadlines = [r.deadline_at for r in requests if r.deadline_at is not None]
        if len(deadlines) == len(requests):  # every call's own deadline bounds the wait
            limit = min(limit, time.monotonic() + max(deadlines) - time.time())
        try:
            while True:
                try:
                    node = router.pick()
                except NoNode as exc:
                    return undispatched(first.tool, first.idempotency_key, "failed", str(exc))
                if not node.suspect:
                    break
                try:
                    left = max(0.001, limit - time.monotonic())
                    await asyncio.wait_for(node.actor.ready.remote(), min(left, PROBE_WAIT))
                except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnschedulableError):
                    router.failed(node, for_good=True)  # its node is gone: never again
                except (ray.exceptions.RayError, TimeoutError) as exc:
                    router.unanswered_probe(node)  # the next probe goes to another, if any
                    if time.monotonic() >= limit:
                        if deadlines and time.time() >= min(deadlines):
                            why = "the deadline passed before a node was ready"
                            return undispatched(first.tool, first.idempotency_key, "timed_out", why)
                        why = f"no node was ready within {self._acquire_timeout} s: {exc}"
                        return undispatched(first.tool, first.idempotency_key, "failed", why)
                    await asyncio.sleep(0.1)
                else:
                    router.answered(node)
                    break
        except asyncio.CancelledError:
            why = "cancelled before it reached a node"
            return undispatched(first.tool, first.idempotency_key, "cancelled", why)
        placed.node = node
        router.started(node, len(requests))
        return None

    async def _consume(
        self, request: CallRequest, placed: _Placed, on_chunk: ChunkCallback | None
    ) -> Outcome:
        """One call's end from its node: its outcome, a refusal raised, or ``node_lost``."""
        if (unplaced := await self._place([request], placed)) is not None:
            return unplaced
        node = placed.node
        assert node is not None and self._router is not None
        if on_chunk is None:
            try:
                return await self._result(node, request, node.actor.run.remote(to_row(request)))
            finally:
                self._router.ended(node)
        ray = _ray()
        try:
            outcome = await self._stream(node, request, on_chunk)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
            return self._lost(node, request, exc)
        except ray.exceptions.RayTaskError as exc:
            raise _unwrap(exc) from None
        finally:
            self._router.ended(node)
        self._router.answered(node)
        return outcome

    async def _stream(
        self, node: Node[Any], request: CallRequest, on_chunk: ChunkCallback
    ) -> Outcome:
        stream = node.actor.stream.options(num_returns="streaming").remote(to_row(request))
        deliver: ChunkCallback | None = on_chunk
        async for ref in stream:
            item = await ref
            if isinstance(item, Outcome):
                return item
            if deliver is not None:
                try:
                    deliver(item)
                except Exception:
                    log.exception("on_chunk failed; no more chunks for this call")
                    deliver = None
        raise ClusterError("the node's stream ended without an outcome")

    async def _consume_batch(
        self, batch: list[CallRequest], placed: _Placed
    ) -> list[Outcome | BaseException]:
        if (unplaced := await self._place(batch, placed)) is not None:
            replace = msgspec.structs.replace
            return [
                replace(unplaced, tool=r.tool, idempotency_key=r.idempotency_key) for r in batch
            ]
        node = placed.node
        assert node is not None and self._router is not None
        ray = _ray()
        try:
            packed = await node.actor.run_many.remote([to_row(r) for r in batch])
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
            return [self._lost(node, request, exc) for request in batch]
        finally:
            self._router.ended(node, len(batch))
        self._router.answered(node)
        return [_unwrap(r) if isinstance(r, BaseException) else r for r in unpack_outcomes(packed)]

    def _lost(self, node: Node[Any], request: CallRequest, exc: BaseException) -> Outcome:
        ray = _ray()
        assert self._router is not None
        gone = (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnschedulableError)
        for_good = isinstance(exc, gone)
        self._router.failed(node, for_good=for_good)
        log.warning("node %s lost under call %s: %s", node.label, request.call_id, exc)
        detail = "its actor died" if for_good else "its actor is unavailable"
        return node_lost(request.tool, request.idempotency_key, f"{node.label}: {detail}")

    async def _cancel(
        self, placed: _Placed, requests: list[CallRequest], call: asyncio.Future[Any]
    ) -> None:
        """Cancel calls cooperatively on their node (returns once they ended there); a
        call not placed yet is cancelled here. A node lost meanwhile needs no cancel: its
        calls end ``node_lost``."""
        node = placed.node
        if node is None:
            call.cancel()  # still waiting for a node: it ends cancelled, never sent
            return
        await self._cancel_on(node, requests)

    async def _cancel_on(self, node: Node[Any], requests: list[CallRequest]) -> None:
        ray = _ray()
        try:
            await node.actor.cancel.remote([r.call_id for r in requests])
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            log.info("cancel on %s not delivered: %s", node.label, exc)


class _Placed:
    """Which node a call (or a batch) went to; None while it waits for one."""

    __slots__ = ("node",)

    def __init__(self) -> None:
        self.node: Node[Any] | None = None


class RayCallHandle:
    """A call started with `RaySupervisor.start`: cancel it, or wait for its `Outcome`."""

    __slots__ = ("_call", "_cancel", "_placed", "_request")

    def __init__(
        self,
        request: CallRequest,
        placed: _Placed,
        call: asyncio.Future[Outcome],
        cancel: Callable[[], Awaitable[None]],
    ) -> None:
        self._request = request
        self._placed = placed
        self._call = call
        self._cancel = cancel

    @property
    def node(self) -> str | None:
        """Which node runs it (None while it waits for one)."""
        node = self._placed.node
        return None if node is None else node.label

    @property
    def tool(self) -> str:
        return self._request.tool

    @property
    def idempotency_key(self) -> str:
        """The caller's key, or the one made for this call (for `RaySupervisor.outcome`)."""
        return self._request.idempotency_key

    @property
    def done(self) -> bool:
        return self._call.done()

    async def outcome(self) -> Outcome:
        """Wait for the call's `Outcome` (a cancelled wait leaves the call running)."""
        return await asyncio.shield(self._call)

    async def cancel(self) -> Outcome:
        """Cancel cooperatively on its node and return the real `Outcome`: ``cancelled``
        if the adapter acknowledged, ``indeterminate`` if it had to be killed, or
        whatever won the race."""
        if not self._call.done():
            await to_the_end(self._cancel())
        return await to_the_end(self._call)


def _unwrap(exc: BaseException) -> BaseException:
    """The exception a node raised (a refusal), out of Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


__all__ = ["Call", "NoNode", "RayCallHandle", "RaySupervisor"]
