"""`Supervisor.invoke` on the ledger: one lifecycle per call, indeterminate calls stay
pending until reconciled through a fresh session (never re-dispatched), liveness pings."""

from __future__ import annotations

from pathlib import Path

import trio
from sv_support import fake_worker, supervisor

from supervisor.ledger import AuditKind, Completed, Ledger, TimedOut, ToolPolicy
from supervisor.ledger.audit import TERMINAL_KINDS


async def test_every_call_has_one_lifecycle_in_the_ledger() -> None:
    # a generous grace: the deadline's cooperative stop must not become a kill under load
    async with supervisor(pool_size=2, cancel_grace=2.0) as sup:
        outs = [
            await sup.invoke("echo", "a"),
            await sup.invoke("fail", "b"),
            await sup.invoke("sleep", "9", deadline=0.2),
        ]
        handle = await sup.start("sleep", "9")
        await trio.sleep(0.1)
        outs.append(await handle.cancel())
        assert [o.status for o in outs] == ["completed", "failed", "timed_out", "cancelled"]
        events = sup.ledger.audit()
        for out in outs:
            kinds = [e.kind for e in events if e.op_id == out.op_id]
            assert kinds[0] == AuditKind.STARTED
            assert sum(k in TERMINAL_KINDS for k in kinds) == 1 and kinds[-1] in TERMINAL_KINDS
            assert kinds.count(AuditKind.CLAIMED) == 1
        assert sup.ledger.verify_audit_chain() == len(events)
        assert sup.ledger.pending_count == 0


async def test_indeterminate_stays_pending_until_reconciled_by_a_fresh_session() -> None:
    async with supervisor(**fake_worker("durable")) as sup:
        ok = await sup.invoke("fake", "abc")
        assert (ok.status, ok.value) == ("completed", "cba")
        lost = await sup.invoke("fake", "die")  # the worker exits mid-call
        assert (lost.status, lost.kill_reason) == ("indeterminate", "crash:exit:7")
        info = sup.ledger.status(lost.op_id)
        assert info.indeterminate and info.outcome is None
        assert [i.id for i in sup.ledger.indeterminate()] == [lost.op_id]
        resolved = await sup.reconcile(lost.op_id)  # asks the worker of a new session
        assert resolved == Completed("recovered")
        assert sup.ledger.outcome(lost.op_id) == Completed("recovered")
        kinds = [e.kind for e in sup.ledger.audit() if e.op_id == lost.op_id]
        assert kinds == ["started", "claimed", "indeterminate", "completed"]


async def test_reconcile_of_an_unknown_key_leaves_the_operation_pending() -> None:
    async with supervisor() as sup:
        handle = await sup.start("hang", "", idempotency_key="pay-2")
        await trio.sleep(0.2)
        out = await handle.cancel()
        assert out.status == "indeterminate"
        # the reference worker remembers only its own session: a fresh one says unknown
        assert await sup.reconcile(out.op_id) is None
        assert sup.ledger.status(out.op_id).indeterminate
        assert sup.ledger.outcome(out.op_id) is None
        kinds = [e.kind for e in sup.ledger.audit() if e.op_id == out.op_id]
        assert kinds[-1] == "reconcile_observed" and kinds.count("claimed") == 1


async def test_idle_sessions_answer_pings() -> None:
    async with supervisor(ping_interval=0.1) as sup:
        session = sup.pool.sessions[0]
        rtt = await session.ping()
        assert 0 < rtt < 1
        await trio.sleep(0.5)  # several idle pings happen; the session stays healthy
        assert session.usable and (await sup.invoke("echo", "x")).session_id == session.id


async def test_a_durable_ledger_keeps_every_outcome(tmp_path: Path) -> None:
    journal = tmp_path / "ops.sqlite"
    async with supervisor(ledger_path=journal) as sup:
        done = await sup.invoke("echo", "kept")
        lost = await sup.invoke("hang", "", deadline=0.2)
    ledger = Ledger(path=journal)
    try:
        ledger.register_external_tool(ToolPolicy("echo", max_calls=10))
        assert ledger.outcome(done.op_id) == Completed("kept")
        info = ledger.status(lost.op_id)  # left indeterminate: closed before its expiry
        assert info.indeterminate and info.outcome is None
        assert ledger.verify_audit_chain() > 0
    finally:
        ledger.close()
    async with supervisor(ledger_path=journal) as sup:  # reopened: it expires it
        with trio.fail_after(5):
            while sup.ledger.outcome(lost.op_id) is None:
                await trio.sleep(0.05)
        assert isinstance(sup.ledger.outcome(lost.op_id), TimedOut)
