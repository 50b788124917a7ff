"""The API of `Supervisor` with real sandboxed workers: results, chunks, errors, retries,
``start``/``cancel``/``outcome``, caller cancellation, idempotency keys, refusals."""

from __future__ import annotations

import json

import pytest
import trio
from sv_support import ADAPTERS, EXAMPLES, check_ledger, supervisor

from supervisor import DuplicateOperation, Supervisor, SupervisorError
from supervisor.ledger import (
    Cancelled,
    Completed,
    InvalidInput,
    ToolPolicy,
    UnknownTool,
)
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.grants import DescribeError
from supervisor.workers.outcome import Outcome


async def test_text_and_json_results_complete() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("echo", "héllo")
        assert (out.status, out.value, out.error) == ("completed", "héllo", None)
        assert out.bytes_in == out.bytes_out == len("héllo".encode())
        assert out.session_id and out.rid == "r1" and out.attempt == 1
        assert out.total_s >= out.run_s > 0
        value = {"a": [1, 2, {"b": None}], "c": "d"}
        out = await sup.invoke("json.echo", value)
        assert out.status == "completed" and out.value == value
        assert isinstance(sup.ledger.outcome(out.op_id), Completed)
        check_ledger(sup, indeterminate_ok=False)


async def test_the_example_from_the_design_runs() -> None:
    async with supervisor(adapters=[EXAMPLES], pool_size=2) as sup:
        seen: list[str] = []
        out = await sup.invoke("text.upper", "hi", deadline=2.0, on_chunk=seen.append)
        assert (out.status, out.value) == ("completed", "HI")
        out = await sup.invoke("progress.count", "3", on_chunk=seen.append)
        assert out.status == "completed" and seen == ["1", "2", "3"] and out.chunks == 3


async def test_chunks_arrive_in_order_before_the_result() -> None:
    async with supervisor() as sup:
        chunks: list[str] = []
        out = await sup.invoke("chunks", "5", on_chunk=chunks.append)
        assert out.status == "completed" and out.value == "sent 5"
        assert chunks == ["c1", "c2", "c3", "c4", "c5"] and out.chunks == 5


async def test_stream_limits_come_from_the_host_policy() -> None:
    from supervisor.ledger import StreamPolicy

    stream = StreamPolicy(max_chunks=2, max_chunk_bytes=8, max_total_bytes=16)
    async with supervisor(tools=[ToolPolicy("chunks", max_calls=10, stream=stream)]) as sup:
        chunks: list[str] = []
        out = await sup.invoke("chunks", "5", on_chunk=chunks.append)
        # the worker's ctx.emit said False after two: nothing beyond the grant was sent
        assert (out.status, out.value, chunks) == ("completed", "sent 2", ["c1", "c2"])


async def test_adapter_errors_are_failed_outcomes_and_the_session_lives_on() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("fail", "no such order")
        assert (out.status, out.error_code, out.error) == ("failed", "nope", "no such order")
        crashed = await sup.invoke("crash", "")
        assert crashed.status == "failed" and crashed.error_code == "adapter_error"
        assert "secret" not in (crashed.error or "")  # sanitised by the worker
        again = await sup.invoke("echo", "still here")
        assert again.status == "completed" and again.session_id == out.session_id


async def test_output_over_the_grant_is_an_error_not_a_violation() -> None:
    tools = [ToolPolicy("big", max_calls=10, max_output_bytes=1000)]
    async with supervisor(tools=tools) as sup:
        out = await sup.invoke("big", "5000")
        assert out.status == "failed" and out.error_code == "output_too_large"
        assert (await sup.invoke("big", "10")).status == "completed"


async def test_retryable_errors_are_retried_with_the_same_key() -> None:
    tools = [ToolPolicy("flaky", max_calls=10, max_attempts=3)]
    async with supervisor(tools=tools, retry_backoff=0.001) as sup:
        out = await sup.invoke("flaky", "3")
        assert out.status == "completed" and out.attempt == 3
        assert out.value == f"ok attempt=3 key={out.idempotency_key}"
        kinds = [e.kind for e in sup.ledger.audit() if e.op_id == out.op_id]
        assert kinds.count("retry_scheduled") == 2 and kinds[-1] == "completed"
        out = await sup.invoke("flaky", "9")  # attempts run out: the last error stands
        assert out.status == "failed" and out.retryable and out.attempt == 3


async def test_one_policy_override_changes_only_what_it_names() -> None:
    """Issue 18: naming the attempts of a described tool leaves its other defaults (many
    calls, 512 KiB of input, its stream) as documented."""
    tools = [ToolPolicy("flaky", max_attempts=2), ToolPolicy("chunks", deadline=30)]
    async with supervisor(tools=tools, retry_backoff=0.001) as sup:
        first, second = await sup.invoke("flaky", "2"), await sup.invoke("flaky", "2")
        assert (first.status, first.attempt, second.status) == ("completed", 2, "completed")
        assert sup.tools["flaky"].max_input_bytes == 512 * 1024
        chunks: list[str] = []
        out = await sup.invoke("chunks", "3", on_chunk=chunks.append)
        assert (out.value, chunks) == ("sent 3", ["c1", "c2", "c3"])
        assert sup.tools["chunks"].deadline == 30
        big = await sup.invoke("echo", "x" * 100_000)  # no policy named: every default
        assert big.status == "completed"


async def test_caller_idempotency_key_reaches_the_adapter() -> None:
    tools = [ToolPolicy("flaky", max_calls=10)]
    async with supervisor(tools=tools) as sup:
        out = await sup.invoke("flaky", "1", idempotency_key="order-7.charge")
        assert out.value == "ok attempt=1 key=order-7.charge"
        assert out.idempotency_key == "order-7.charge"


async def test_a_pending_key_cannot_be_dispatched_twice() -> None:
    async with supervisor(pool_size=2) as sup:
        handle = await sup.start("sleep", "5", idempotency_key="k1")
        with pytest.raises(DuplicateOperation):
            await sup.invoke("sleep", "0", idempotency_key="k1")
        assert (await handle.cancel()).status == "cancelled"
        out = await sup.invoke("echo", "x", idempotency_key="k1")  # resolved: free again
        assert out.status == "completed"


async def test_refusals_happen_before_anything_runs() -> None:
    tools = [ToolPolicy("echo", max_calls=10, max_input_bytes=4)]
    async with supervisor(tools=tools) as sup:
        with pytest.raises(UnknownTool):
            await sup.invoke("nope", "x")
        with pytest.raises(InvalidInput):
            await sup.invoke("echo", "too long")
        with pytest.raises(InvalidInput):
            await sup.invoke("json.echo", "a string is not a json object")
        with pytest.raises(ValueError):
            await sup.invoke("echo", "x", deadline=-1)
        assert sup.ledger.pending_count == 0


async def test_start_then_outcome() -> None:
    async with supervisor() as sup:
        handle = await sup.start("echo", "later")
        out = await handle.outcome()
        assert out.status == "completed" and out.value == "later" and handle.done


async def test_handle_cancel_is_cooperative() -> None:
    async with supervisor() as sup:
        handle = await sup.start("sleep", "30")
        await trio.sleep(0.2)
        out = await handle.cancel()
        assert out.status == "cancelled" and out.kill_reason is None
        assert isinstance(sup.ledger.outcome(handle.op_id), Cancelled)
        kinds = [e.kind for e in sup.ledger.audit() if e.op_id == handle.op_id]
        assert kinds[-2:] == ["cancellation_requested", "cancelled"]
        assert (await sup.invoke("echo", "same worker")).session_id == out.session_id


async def test_the_callers_cancel_waits_longer_for_the_acknowledgement_than_a_deadline() -> None:
    # 0.1 s to acknowledge: within the caller's cancel grace (0.25 s), past a deadline's
    # (15 ms); the first call is cancelled and its worker lives on, the second is killed
    async with supervisor(pool_size=1) as sup:
        handle = await sup.start("slow.ack", "0.1")
        await trio.sleep(0.2)
        out = await handle.cancel()
        if out.status == "indeterminate":  # a loaded host missed even the caller's grace:
            # then the kill came no sooner than that grace after the cancel
            assert out.kill_reason == "host_cancel"
            times = {e.kind: e.time for e in sup.ledger.audit() if e.op_id == handle.op_id}
            assert times["indeterminate"] - times["cancellation_requested"] >= 0.25 - 0.005
        else:
            assert out.status == "cancelled" and out.kill_reason is None
        late = await sup.invoke("slow.ack", "0.1", deadline=0.3)
        assert late.status == "indeterminate" and late.kill_reason == "deadline"
        if out.status == "cancelled":
            assert late.session_id == out.session_id


async def test_a_prepared_call_runs_in_the_driving_task_and_cancels_by_its_handle() -> None:
    async with supervisor(pool_size=1) as sup:
        with pytest.raises(UnknownTool):  # refusals at once, before anything runs
            sup.prepare("nope", "x")
        handle = sup.prepare("echo", "inline")
        assert not handle.done
        out = await sup.drive(handle)
        assert (out.status, out.value) == ("completed", "inline") and handle.done
        slow = sup.prepare("sleep", "30")
        outcomes: list[Outcome] = []

        async def drive() -> None:
            outcomes.append(await sup.drive(slow))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive)
            await trio.sleep(0.2)
            cancelled = await slow.cancel()  # from another task: the real outcome, to both
        assert outcomes == [cancelled] and cancelled.status == "cancelled"
        with trio.move_on_after(0.3) as scope:  # the driving task cancelled: cooperative
            await sup.drive(sup.prepare("sleep", "30"))
        assert scope.cancelled_caught
        check_ledger(sup, indeterminate_ok=False)


async def test_cancel_before_dispatch_runs_nothing() -> None:
    async with supervisor(pool_size=1) as sup:
        busy = await sup.start("sleep", "30")
        await trio.sleep(0.1)
        queued = await sup.start("echo", "never")
        out = await queued.cancel()
        assert out.status == "cancelled" and out.rid is None and out.run_s == 0
        await busy.cancel()


async def test_caller_cancellation_becomes_a_cooperative_cancel() -> None:
    events = []
    async with supervisor(on_audit=events.append) as sup:
        with trio.move_on_after(0.3) as scope:
            await sup.invoke("sleep", "30")
        assert scope.cancelled_caught
        assert [e.status for e in events] == ["cancelled"]
        assert events[0].kill_reason is None
        check_ledger(sup, indeterminate_ok=False)


async def test_cancelling_an_uncooperative_call_kills_its_session() -> None:
    async with supervisor() as sup:
        handle = await sup.start("hang", "")
        await trio.sleep(0.2)
        out = await handle.cancel()
        assert (out.status, out.kill_reason) == ("indeterminate", "host_cancel")
        assert sup.ledger.status(out.op_id).indeterminate
        assert (await sup.invoke("echo", "fresh")).session_id != out.session_id


async def test_worker_argv_needs_tools_and_exactly_one_program() -> None:
    with pytest.raises(ValueError, match="tools"):
        Supervisor(worker_argv=["/bin/true"])
    with pytest.raises(ValueError, match="exactly one"):
        Supervisor()
    with pytest.raises(ValueError, match="exactly one"):
        Supervisor(adapters=[ADAPTERS], worker_argv=["/bin/true"], tools=[ToolPolicy("x")])


def test_sessions_serve_as_many_calls_as_their_ids_allow_by_default() -> None:
    # every call takes a rid and keeps one id free for its cancel (4,096 ids a session)
    assert Supervisor(adapters=[ADAPTERS]).max_calls_per_worker == 2047
    assert Supervisor(adapters=[ADAPTERS], max_in_flight=8).max_calls_per_worker == 2040
    with pytest.raises(ValueError, match=r"1\.\.2040"):
        Supervisor(adapters=[ADAPTERS], max_in_flight=8, max_calls_per_worker=2041)


async def test_adapters_that_do_not_load_fail_the_start_clearly() -> None:
    with pytest.raises(DescribeError, match="no_such_module_here"):
        async with Supervisor(adapters=["json:no_such_module_here"]):
            pass


async def test_a_configured_tool_must_be_served() -> None:
    with pytest.raises(ValueError, match="do not serve"):
        async with Supervisor(adapters=[ADAPTERS], tools=[ToolPolicy("missing")]):
            pass


async def test_closed_supervisor_refuses_calls() -> None:
    async with supervisor() as sup:
        pass
    with pytest.raises(SupervisorError):
        await sup.invoke("echo", "x")


async def test_stdout_and_stderr_are_diagnostics_only() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("print", "to the console")
        assert out.status == "completed" and out.value == "printed"
        session = sup.pool.sessions[0]
        assert "to the console" in session.stdout.text()
        assert "to the console" in session.stderr.text()


async def test_whoami_runs_as_a_sandbox_uid() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("whoami", "")
        info = json.loads(out.value)
        assert info["uid"] != 0 and info["pid"] < 100  # its own pid namespace


async def test_a_failed_start_leaves_nothing_to_close() -> None:
    sup = Supervisor(adapters=["json:no_such_module_here"])
    with pytest.raises(DescribeError):
        await sup.__aenter__()
    await sup.aclose()  # nothing left to do
    with pytest.raises(SupervisorError):
        await sup.invoke("echo", "x")


async def test_closing_cancels_every_call_in_flight_cooperatively() -> None:
    # whoever awaits the call (a handle, another task): the worker gets a cancel and its
    # grace, and only one that ignores it is killed
    events: list[CallEvent] = []
    outcomes: list[Outcome] = []
    closing = supervisor(pool_size=2, max_in_flight=2, cancel_grace=0.5)
    async with trio.open_nursery() as nursery, closing as sup:
        sup.add_audit_callback(events.append)
        handle = await sup.start("sleep", "30")
        ignored = await sup.start("hang", "")

        async def caller() -> None:
            outcomes.append(await sup.invoke("sleep", "30"))

        nursery.start_soon(caller)
        await trio.sleep(0.3)
    # closed (the supervisor first, then the nursery): it waited for the cancels
    assert (await handle.outcome()).status == "cancelled"
    assert [o.status for o in outcomes] == ["cancelled"]
    out = await ignored.outcome()
    assert (out.status, out.kill_reason) == ("indeterminate", "host_cancel")
    assert sorted(e.status for e in events) == ["cancelled", "cancelled", "indeterminate"]
