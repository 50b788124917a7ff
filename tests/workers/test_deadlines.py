"""Deadlines with real workers: cooperative stop, kill, late results, session lifetime."""

from __future__ import annotations

import signal

import pytest
import trio
from proc_helpers import alive
from sv_support import check_ledger, ended_session, supervisor, worker_process

from supervisor.ledger import TimedOut


async def test_a_cooperative_adapter_stops_cleanly_as_timed_out() -> None:
    # a generous grace: at the default 15 ms a loaded machine turns the adapter's late
    # acknowledgement into a kill (seen in a clean-clone run at load 15-20)
    async with supervisor(cancel_grace=2.0) as sup:
        started = trio.current_time()
        out = await sup.invoke("sleep", "30", deadline=0.3)
        assert (out.status, out.kill_reason, out.error_code) == ("timed_out", None, "deadline")
        assert 0.3 <= trio.current_time() - started < 1.5
        assert isinstance(sup.ledger.outcome(out.op_id), TimedOut)
        # stopped cleanly: the same worker serves the next call
        assert (await sup.invoke("echo", "x")).session_id == out.session_id


async def test_a_stubborn_adapter_is_killed_and_indeterminate() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("hang", "", deadline=0.3)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")
        assert out.termination == "timeout"  # the sandbox's own classification
        dead = await ended_session(sup, out.session_id)
        assert dead.end_reason == "deadline" and alive(dead.survivors()) == []
        info = sup.ledger.status(out.op_id)
        assert info.indeterminate and info.outcome is None  # pending, not resolved
        fresh = await sup.invoke("echo", "x")
        assert fresh.status == "completed" and fresh.session_id != out.session_id


async def test_indeterminate_operations_expire_after_their_deadline() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("hang", "", deadline=0.2)
        assert out.status == "indeterminate"
        with trio.fail_after(5):
            while sup.ledger.outcome(out.op_id) is None:
                await trio.sleep(0.05)
        assert isinstance(sup.ledger.outcome(out.op_id), TimedOut)
        kinds = [e.kind for e in sup.ledger.audit() if e.op_id == out.op_id]
        assert kinds[-2:] == ["indeterminate", "timed_out"]  # never re-dispatched
        assert kinds.count("claimed") == 1


async def test_unsupported_cancellation_runs_into_the_kill() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("uncancellable", "30", deadline=0.3)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")


async def test_a_valid_result_after_the_deadline_is_never_completed() -> None:
    # a generous grace: the stubborn adapter answers (result, then too_late) within it
    async with supervisor(cancel_grace=2.0) as sup:
        out = await sup.invoke("stubborn", "0.4", deadline=0.2)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")
        assert out.value is None
        dead = await ended_session(sup, out.session_id)
        assert dead.end_reason == "deadline"


async def test_a_deadline_that_passes_in_the_queue_dispatches_nothing() -> None:
    async with supervisor(pool_size=1) as sup:
        busy = await sup.start("sleep", "30")
        await trio.sleep(0.1)
        out = await sup.invoke("echo", "x", deadline=0.2)
        assert (out.status, out.rid, out.attempt) == ("timed_out", None, 0)
        assert [e.kind for e in sup.ledger.audit() if e.op_id == out.op_id] == [
            "started",
            "timed_out",
        ]
        await busy.cancel()


async def test_the_session_lifetime_is_measured_from_spawn() -> None:
    async with supervisor(session_lifetime=1.0, pool_min=1) as sup:
        out = await sup.invoke("hang", "")  # no call deadline: the session's ends it
        assert (out.status, out.kill_reason) == ("indeterminate", "session_deadline")
        dead = await ended_session(sup, out.session_id)
        assert dead.spawned_at is not None
        assert 1.0 <= dead.expires_at - dead.spawned_at <= 1.0 + 1e-9
        check_ledger(sup)


async def test_sessions_near_their_end_are_retired_not_killed() -> None:
    async with supervisor(session_lifetime=4.0) as sup:
        first = await sup.invoke("echo", "a")
        (session,) = [s for s in sup.pool.sessions if s.id == first.session_id]
        assert session.spawned_at is not None
        # just within the last tenth of its life (from its spawn, by the supervisor's
        # clock): retired when asked for a call, and closed (a close under way at the
        # end of its life is left to finish: test_a_session_closing_at_its_end_...)
        await trio.sleep_until(session.spawned_at + 3.62)
        second = await sup.invoke("echo", "b")
        assert second.session_id != first.session_id  # not served by the retired one
        old = await ended_session(sup, first.session_id)
        assert old.end_reason == "closed" and old.returncode == 0


async def test_a_session_closing_at_its_end_is_let_close() -> None:
    """The lifetime ends an idle session cleanly; one already closing when it comes is
    left to its close, which its own ``close_timeout`` bounds (a stopped worker holds the
    close open across the lifetime's end): never ``session_deadline``."""
    async with supervisor(session_lifetime=5.0) as sup:
        first = await sup.invoke("echo", "a")
        (session,) = [s for s in sup.pool.sessions if s.id == first.session_id]
        worker = worker_process(session.pid)
        worker.send_signal(signal.SIGSTOP)
        try:
            await trio.sleep_until(session.expires_at - 1.0)  # the close's 2 s span the end
            sup.pool.retire(session)
            await trio.sleep_until(session.expires_at + 0.1)
        finally:
            worker.send_signal(signal.SIGCONT)
        old = await ended_session(sup, first.session_id)
        # closed (exit 0) once the worker runs again; close_timeout if a loaded host
        # did not let it exit within the close's bound
        assert old.end_reason in ("closed", "close_timeout"), old.end_reason


@pytest.mark.parametrize("grace", [0.0, 0.02])
async def test_kill_reaps_before_the_outcome_is_returned(grace: float) -> None:
    async with supervisor(cancel_grace=grace) as sup:
        (session,) = sup.pool.sessions
        out = await sup.invoke("hang", "", deadline=0.2)
        assert out.session_id == session.id
        # the outcome comes only once nothing of the sandbox is alive
        assert session.returncode is not None and alive(session.survivors()) == []
