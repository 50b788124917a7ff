"""`RaySupervisor` on a real local Ray with real sandboxes: calls complete, fail, time out,
stream, run in batches and are cancelled (through the handle and through the awaiting
task) with their real outcomes; a deadline that passed while queued; refusals raised in
the caller; outcomes by key; the actor SIGKILLed mid-call (``indeterminate``/``node_lost``,
nothing survives, the restarted actor recovers its ledger and expires the call) and killed
by ``ray.kill`` (the next owner removes the cgroups); shutdown that leaves no process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cluster_helpers import (
    EXAMPLES,
    RAY_GROUP,
    ROOT,
    alive,
    cgroups_of,
    descendants,
    host_prefix,
    local_ray,
    nice_values,
    wait_for,
)

from supervisor import DuplicateOperation
from supervisor.cluster import NODE_LOST, Call, NodeUnfit, RaySupervisor
from supervisor.cluster.wire import CallRequest, to_row, unpack_outcomes
from supervisor.ledger import InvalidInput, UnknownTool
from supervisor.workers.supervisor import EXPIRY_SLACK

pytestmark = RAY_GROUP

T = TypeVar("T")


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    with local_ray() as address:
        yield address


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sup(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaySupervisor]:
    """One supervisor for the call tests (it holds no state of an event loop, so each
    test's ``asyncio.run`` may use it). A cancel's grace of 1 s: Ray runs the actor and its
    sandboxes at nice 15, and on a loaded machine 0.2 s turned a batch's cooperative
    cancel into a kill (seen in a clean-clone run)."""
    supervisor = RaySupervisor(
        adapters=[EXAMPLES], pool_size=2, ping_interval=None, cancel_grace=1.0,
        ledger_dir=str(tmp_path_factory.mktemp("ledgers")), name="calls",
    )  # fmt: skip
    run(supervisor.__aenter__())
    yield supervisor
    run(supervisor.aclose())


def actor_of(sup: RaySupervisor) -> Any:
    import ray

    return ray.get_actor(f"{sup.name}:{sup.nodes[0].node_id}", namespace=sup.namespace)


# -- calls ---------------------------------------------------------------------------------


def test_calls_complete_fail_time_out_and_stream_in_order(sup: RaySupervisor) -> None:
    async def main() -> None:
        out = await sup.invoke("text.upper", "héllo", deadline=10)
        assert (out.status, out.value, out.op_id) == ("completed", "HÉLLO", out.op_id)
        assert out.idempotency_key and out.idempotency_key.startswith("ray-")
        out = await sup.invoke("json.echo", {"a": [1, None]})
        assert out.value == {"a": [1, None]}
        out = await sup.invoke("progress.count", "not a number")
        assert (out.status, out.error_code) == ("failed", "invalid_input")
        out = await sup.invoke("sleep", "30", deadline=0.5)
        assert (out.status, out.error_code) == ("timed_out", "deadline")
        seen: list[tuple[str, int]] = []
        out = await sup.invoke(
            "progress.count", "5", on_chunk=lambda t: seen.append((t, threading.get_ident()))
        )
        assert out.status == "completed" and out.chunks == 5
        here = threading.get_ident()
        assert seen == [(str(i), here) for i in range(1, 6)]  # in order, in this loop

    run(main())


def test_chunks_arrive_as_they_come(sup: RaySupervisor) -> None:
    async def main() -> None:
        arrived: list[float] = []
        began = time.monotonic()
        out = await sup.invoke(
            "progress.count", "4/0.3", on_chunk=lambda _: arrived.append(time.monotonic())
        )
        ended = time.monotonic()
        assert out.status == "completed" and len(arrived) == 4
        assert arrived[0] - began < ended - began - 0.6  # the first long before the end

    run(main())


def test_batches_return_outcomes_in_order_and_refusals_as_asked(sup: RaySupervisor) -> None:
    async def main() -> None:
        sup.batch_size = 7
        calls = [Call(tool="text.reverse", value=f"ab{i}") for i in range(30)]
        outs = await sup.invoke_many([*calls, ("text.upper", "x")])
        assert [o.value for o in outs] == [f"ab{i}"[::-1] for i in range(30)] + ["X"]  # type: ignore[union-attr]
        mixed = [("text.upper", "a"), ("json.echo", float("nan")), ("text.upper", "b")]
        with pytest.raises(InvalidInput):
            await sup.invoke_many(mixed)
        outs = await sup.invoke_many(mixed, return_exceptions=True)
        assert isinstance(outs[1], InvalidInput)
        assert [outs[0].value, outs[2].value] == ["A", "B"]  # type: ignore[union-attr]
        sup.batch_size = 100

    run(main())


def test_a_deadline_is_the_callers_wall_clock_so_queued_time_counts(sup: RaySupervisor) -> None:
    """A call whose caller's deadline passed before it reached the node (queued in Ray)
    ends ``timed_out`` there without being dispatched."""
    actor = actor_of(sup)

    async def main() -> None:
        late = CallRequest(
            call_id="late-1", tool="sleep", value="5", deadline_at=time.time() - 0.01,
            idempotency_key="late-1",
        )  # fmt: skip
        (out,) = unpack_outcomes(await actor.run.remote(to_row(late)))
        assert not isinstance(out, BaseException)
        assert (out.status, out.run_s, out.session_id) == ("timed_out", 0.0, None)

    run(main())


def test_refusals_raise_in_the_caller(sup: RaySupervisor) -> None:
    async def main() -> None:
        with pytest.raises(UnknownTool):
            await sup.invoke("no.such.tool", "x")
        with pytest.raises(UnknownTool):
            await sup.start("no.such.tool", "x")
        with pytest.raises(InvalidInput):  # the node's refusal, out of Ray's wrapper
            await sup.invoke("json.echo", float("nan"))
        with pytest.raises(ValueError):
            await sup.invoke("text.upper", "x", deadline=-1)
        handle = await sup.start("sleep", "30", idempotency_key="order-1")
        with pytest.raises(DuplicateOperation):
            await sup.invoke("sleep", "0", idempotency_key="order-1")
        assert (await handle.cancel()).status == "cancelled"

    run(main())


# -- cancellation ----------------------------------------------------------------------------


def test_a_handle_cancels_mid_stream_with_the_real_outcome(sup: RaySupervisor) -> None:
    async def main() -> None:
        chunks: list[str] = []
        got = asyncio.Event()

        def on_chunk(text: str) -> None:
            chunks.append(text)
            got.set()

        handle = await sup.start("progress.count", "1000/0.02", on_chunk=on_chunk)
        await asyncio.wait_for(got.wait(), 20)
        with pytest.raises(TimeoutError):  # a wait for the outcome leaves it running
            await asyncio.wait_for(handle.outcome(), 0.1)
        assert not handle.done
        out = await handle.cancel()
        assert (out.status, out.kill_reason) == ("cancelled", None)
        assert chunks and out.chunks >= len(chunks)
        assert await handle.outcome() == out
        stubborn = await sup.start("stubborn.sleep", "30")
        await asyncio.sleep(0.5)
        out = await stubborn.cancel()  # it ignores its cancel: killed after the grace
        assert (out.status, out.kill_reason) == ("indeterminate", "host_cancel")

    run(main())


def test_cancelling_the_task_cancels_on_the_node_then_propagates(sup: RaySupervisor) -> None:
    async def main() -> None:
        got = asyncio.Event()
        task = asyncio.create_task(
            sup.invoke("progress.count", "1000/0.02", on_chunk=lambda _: got.set(),
                       idempotency_key="task-1")
        )  # fmt: skip
        await asyncio.wait_for(got.wait(), 20)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        out = await sup.outcome("task-1")  # the node's own account: cancelled, not lost
        assert out is not None and out.status == "cancelled" and out.chunks > 0
        # a call without on_chunk runs in the caller's task: the same, cancelled there
        task = asyncio.create_task(sup.invoke("sleep", "30", idempotency_key="task-2"))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        out = await sup.outcome("task-2")
        assert out is not None and out.status == "cancelled"
        # the key is no more this supervisor's in flight (no DuplicateOperation here)
        assert (await sup.invoke("sleep", "0", idempotency_key="task-2")).status
        # a batch too: every call still running is cancelled cooperatively
        batch = asyncio.create_task(sup.invoke_many([Call(tool="sleep", value="30",
                                                          idempotency_key=f"b-{i}")
                                                     for i in range(3)]))  # fmt: skip
        await asyncio.sleep(1.0)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
        outs = [await sup.outcome(f"b-{i}") for i in range(3)]
        assert {o.status for o in outs if o is not None} == {"cancelled"}

    run(main())


# -- node loss -------------------------------------------------------------------------------


def test_an_actor_sigkilled_mid_call_is_node_lost_and_its_restart_cleans_up(
    ray_address: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with RaySupervisor(
            adapters=[EXAMPLES], pool_size=1, ping_interval=None, ledger_dir=str(tmp_path),
            name="sigkill",
        ) as sup:  # fmt: skip
            node = sup.nodes[0]
            got = asyncio.Event()
            called = time.time()
            call = asyncio.create_task(
                sup.invoke("progress.count", "1000/0.02", deadline=4, on_chunk=lambda _: got.set(),
                           idempotency_key="lost-1")
            )  # fmt: skip
            await asyncio.wait_for(got.wait(), 20)
            started = descendants(node.pid)
            prefix = host_prefix(node.pid)
            assert started and cgroups_of(prefix)
            os.kill(node.pid, signal.SIGKILL)
            out = await asyncio.wait_for(call, 30)
            assert (out.status, out.kill_reason) == ("indeterminate", NODE_LOST)
            assert out.idempotency_key == "lost-1" and "lost" in (out.error or "")
            # nothing of the dead actor survives: no process, no cgroup
            assert wait_for(lambda: not [p for p in started if alive(p)])
            assert wait_for(lambda: not cgroups_of(prefix))
            # Ray restarted the actor; it recovered the call from its ledger ...
            again = await sup.invoke("text.upper", "after", deadline=30)
            assert again.status == "completed"
            recovered = await sup.outcome("lost-1")
            assert recovered is not None and recovered.status in ("indeterminate", "timed_out")
            # ... and expires it once its deadline (the caller's) has passed: never re-run
            await asyncio.sleep(max(0.0, called + 4 + EXPIRY_SLACK + 0.5 - time.time()))
            expired = await sup.outcome("lost-1")
            assert expired is not None and expired.status == "timed_out"

    run(main())


def test_ray_kill_takes_the_lifeline_too_and_the_next_owner_sweeps(
    ray_address: str, tmp_path: Path
) -> None:
    import ray

    async def main() -> None:
        async with RaySupervisor(
            adapters=[EXAMPLES], pool_size=1, ping_interval=None, ledger_dir=str(tmp_path),
            name="raykill",
        ) as sup:  # fmt: skip
            node = sup.nodes[0]
            handle = await sup.start("sleep", "30", deadline=20)
            await asyncio.sleep(0.5)
            started = descendants(node.pid)
            prefix = host_prefix(node.pid)
            ray.kill(actor_of(sup), no_restart=False)  # SIGKILLs the worker's children too
            out = await asyncio.wait_for(handle.outcome(), 30)
            assert (out.status, out.kill_reason) == ("indeterminate", NODE_LOST)
            assert (await sup.invoke("text.upper", "x", deadline=30)).status == "completed"
            assert wait_for(lambda: not [p for p in started if alive(p)])
            assert wait_for(lambda: not cgroups_of(prefix))  # the restarted actor swept them

    run(main())


# -- start and shutdown ------------------------------------------------------------------------


def test_a_node_that_cannot_start_its_supervisor_is_named(ray_address: str) -> None:
    async def main() -> None:
        bad = RaySupervisor(adapters=["no_such_module_xyz:registry"], name="unfit")
        with pytest.raises(NodeUnfit, match=r"node \S+ \(.*Ray node .*not installed"):
            await bad.__aenter__()
        assert not bad.running

    run(main())
    with pytest.raises(ValueError):
        RaySupervisor(adapters=[EXAMPLES], pool_size=0)  # checked in the caller, at once
    with pytest.raises(ValueError, match="on_audit"):
        RaySupervisor(adapters=[EXAMPLES], on_audit=print)  # it would run on the nodes


def test_niceness_is_set_for_the_actor_and_every_sandbox_under_it(
    ray_address: str, sup: RaySupervisor
) -> None:
    """Ray starts its workers at nice 15 (unless RAY_worker_niceness says otherwise):
    a node reports what its actor runs at, and ``niceness=`` sets every thread of the
    actor, and so every process it starts, before its supervisor starts (19: raising
    the value needs no privilege; lowering it is `test_a_node_may_not_...` in
    test_ray_supervisor_without_ray)."""
    # Ray's, untouched: its loop thread's (threads Ray started early keep the raylet's)
    assert sup.nodes[0].niceness in nice_values(sup.nodes[0].pid)

    async def main() -> None:
        async with RaySupervisor(
            adapters=[EXAMPLES], pool_size=2, ping_interval=None, durable=False, name="nice",
            niceness=19,
        ) as low:  # fmt: skip
            node = low.nodes[0]
            assert node.niceness == 19
            handle = await low.start("sleep", "30")
            await asyncio.sleep(0.5)
            started = descendants(node.pid)
            assert started  # the fork server, a lifeline, bwrap, the worker, ...
            assert {v for pid in [node.pid, *started] for v in nice_values(pid)} == {19}
            assert (await handle.cancel()).status == "cancelled"

    run(main())
    with pytest.raises(ValueError, match="niceness"):
        RaySupervisor(adapters=[EXAMPLES], niceness=20)


def test_aclose_cancels_running_calls_and_leaves_no_process(ray_address: str) -> None:
    async def main() -> tuple[list[int], int]:
        sup = RaySupervisor(adapters=[EXAMPLES], ping_interval=None, durable=False, name="close")
        async with sup:
            pid = sup.nodes[0].pid
            handle = await sup.start("sleep", "30")
            await asyncio.sleep(0.5)
            started = descendants(pid)
        assert (await handle.outcome()).status == "cancelled"  # closed cooperatively
        with pytest.raises(Exception, match="closed"):
            await sup.invoke("text.upper", "x")
        return started, pid

    started, pid = run(main())
    assert started
    assert wait_for(lambda: not alive(pid) and not [p for p in started if alive(p)])


def test_a_graceful_actor_exit_closes_its_supervisor_and_leaves_no_process(
    ray_address: str,
) -> None:
    """``__ray_terminate__`` (as when every handle is gone): Ray lets the running calls
    end, then calls ``__ray_shutdown__``, which closes the supervisor on the actor's loop;
    the process then exits (before the daemon-thread fix it hung forever, a sandbox having
    been cleaned up from that loop)."""

    async def main() -> tuple[list[int], int, Any]:
        sup = RaySupervisor(adapters=[EXAMPLES], ping_interval=None, durable=False, name="grace")
        await sup.__aenter__()
        pid = sup.nodes[0].pid
        out = await sup.invoke("stubborn.sleep", "30", deadline=0.3)  # a cleanup ran
        assert out.status == "indeterminate"
        handle = await sup.start("sleep", "2")
        await asyncio.sleep(0.5)
        started = descendants(pid)
        actor_of(sup).__ray_terminate__.remote()
        out = await asyncio.wait_for(handle.outcome(), 30)
        assert out.status == "completed"  # Ray lets running calls end first
        return started, pid, sup

    started, pid, sup = run(main())
    assert started
    assert wait_for(lambda: not alive(pid) and not [p for p in started if alive(p)], 30)
    run(sup.aclose())


def test_a_forgotten_ray_supervisor_leaves_no_process(ray_address: str) -> None:
    """A driver that exits with its RaySupervisor running (never closed): the driver
    exits, Ray ends the actors it owned, no sandbox survives, and the next actor started
    on the node removes what the killed one left."""
    child = Path(__file__).with_name("forgotten_driver.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    proc = subprocess.run(
        [sys.executable, str(child), ray_address], capture_output=True, env=env, timeout=90
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert report["started"]
    pids = [report["actor"], *report["started"]]
    assert wait_for(lambda: not [p for p in pids if alive(p)], 30)
    # Ray SIGKILLs an actor whose owner died, its children too (the lifeline with them):
    # the next owner on the node removes the cgroups left behind
    next_owner = RaySupervisor(adapters=[EXAMPLES], durable=False, name="next-owner")
    run(next_owner.__aenter__())
    try:
        assert not cgroups_of(report["prefix"])
    finally:
        run(next_owner.aclose())


def test_outcomes_by_key_can_be_asked_later(sup: RaySupervisor) -> None:
    async def main() -> None:
        out = await sup.invoke("text.upper", "kept", idempotency_key="kept-1")
        assert await sup.outcome("kept-1") == out
        assert await sup.outcome("never-seen") is None

    run(main())
