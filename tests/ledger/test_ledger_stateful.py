"""Random sequences of every ledger call (hypothesis stateful testing).

After each step: exactly one terminal audit event per finished operation and none for the
others; nothing completes twice; pending never exceeds its bound; attempts and stream
counters never go back (retries do not reset them); a claimed operation is never handed
out again; refusals match the state; the chain verifies. The durable machine also
restarts the ledger on its journal at random.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from ledger_helpers import REFUSED_WHEN_QUEUED, FakeClock

from supervisor.ledger import (
    AlreadyCompleted,
    Completed,
    Denied,
    Failed,
    Ledger,
    LedgerError,
    LedgerOutcome,
    NotClaimed,
    ReconcileStatus,
    RetryClass,
    StreamPolicy,
    TimedOut,
    ToolPolicy,
    UnknownOperation,
)
from supervisor.ledger.audit import TERMINAL_KINDS

MAX_PENDING = 4
TOOLS = (
    ToolPolicy(
        "a.stream",
        max_calls=1000,
        max_attempts=3,
        deadline=5.0,
        stream=StreamPolicy(
            max_chunks=4, max_chunk_bytes=8, max_total_bytes=20, max_emitted_bytes=24
        ),
    ),
    ToolPolicy(
        "b.json",
        format="json",
        max_calls=1000,
        max_attempts=2,
        max_output_bytes=40,
        contract={"type": "object", "required": ["ok"]},
    ),
    ToolPolicy("c.plain", max_calls=6, max_attempts=2, deadline=12.0),
)
VALUES = {
    "a.stream": st.text(max_size=6),
    "b.json": st.sampled_from([{}, [], {"ok": 1}]),
    "c.plain": st.sampled_from(["x", "y" * 20]),
}
RESULTS = st.one_of(
    st.text(max_size=10), st.sampled_from([{"ok": True}, {"no": 1}, [1], 5, {"ok": "x" * 50}])
)
STATUSES = st.one_of(
    st.just(ReconcileStatus.running()),
    st.just(ReconcileStatus.unknown()),
    st.just(ReconcileStatus.cancelled()),
    st.just(ReconcileStatus.failed("gone")),
    st.builds(ReconcileStatus.succeeded, RESULTS, st.sampled_from(["text", "json"])),
)


#: Rules aimed at an operation only run once one exists.
needs_ops = precondition(lambda self: bool(self.ids))


def redact(text: str) -> str:
    return text.replace("s", "[s]")


class LedgerMachine(RuleBasedStateMachine):
    durable = False

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-stateful-")) if self.durable else None
        self.ids: list[int] = []
        self.outcomes: dict[int, LedgerOutcome] = {}
        self.queued: set[int] = set()  # the model: started, never claimed, not finished
        self.ever_claimed: set[int] = set()
        self.progress: dict[int, tuple[int, int, int, int]] = {}
        self.seen: list[Any] = []
        self.ledger = self.open()

    def open(self) -> Ledger:
        path = None if self.dir is None else self.dir / "journal.sqlite3"
        ledger = Ledger(
            max_pending=MAX_PENDING,
            path=path,
            clock=self.clock.monotonic,
            wall_clock=self.clock.wall,
            audit_capacity=8192,
            retain_outcomes=10_000,
        )
        for policy in TOOLS:
            ledger.register_external_tool(
                policy, redactor=redact if policy.stream is not None else None
            )
        ledger.subscribe_audit(self.seen.append)
        return ledger

    def teardown(self) -> None:
        self.ledger.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------

    def pick(self, index: int) -> int:
        """Mostly a pending operation; sometimes any started one, or one never started."""
        live = [op for op in self.ids if op not in self.outcomes]
        if live and index < 30:
            return live[index % len(live)]
        if self.ids and index < 40:
            return self.ids[index % len(self.ids)]
        return 10_000 + index

    def resolved(self, op: int, outcome: object) -> None:
        assert isinstance(outcome, LedgerOutcome)
        assert op not in self.outcomes, f"operation {op} finished twice"
        self.outcomes[op] = outcome
        self.queued.discard(op)

    def call(self, name: str, op: int, action: Callable[[], object]) -> object:
        """Run ``action`` on ``op``; check a refusal is the one its state demands."""
        try:
            result = action()
        except LedgerError as exc:
            if op in self.outcomes:
                assert isinstance(exc, AlreadyCompleted), exc
            elif op not in self.ids:
                assert isinstance(exc, UnknownOperation), exc
            elif op in self.queued and name in REFUSED_WHEN_QUEUED:
                assert isinstance(exc, NotClaimed), exc
            return None
        assert op in self.ids and op not in self.outcomes, f"{name} accepted on {op}"
        assert not (op in self.queued and name in REFUSED_WHEN_QUEUED)
        return result

    # -- rules ----------------------------------------------------------------------------

    @rule(data=st.data(), tool=st.sampled_from([p.name for p in TOOLS]))
    def start(self, data: st.DataObject, tool: str) -> None:
        try:
            op = self.ledger.start(tool, data.draw(VALUES[tool]))
        except LedgerError:
            return
        assert op not in self.ids
        self.ids.append(op)
        self.queued.add(op)

    @rule(data=st.data(), tool=st.sampled_from([p.name for p in TOOLS]))
    def start_and_claim(self, data: st.DataObject, tool: str) -> None:
        """Most interesting paths begin with a claim: take the short way there."""
        self.start(data, tool)
        self.claim_next()

    @rule()
    def claim_next(self) -> None:
        inv = self.ledger.claim_next()
        if inv is not None:
            assert inv.id in self.queued and inv.id not in self.ever_claimed
            assert inv.attempt == 1
            self.queued.discard(inv.id)
            self.ever_claimed.add(inv.id)

    @needs_ops
    @rule(index=st.integers(0, 45))
    def claim(self, index: int) -> None:
        op = self.pick(index)
        if self.call("claim", op, lambda: self.ledger.claim(op)) is not None:
            assert op not in self.ever_claimed
            self.queued.discard(op)
            self.ever_claimed.add(op)

    @needs_ops
    @rule(index=st.integers(0, 45), cls=st.sampled_from(list(RetryClass)))
    def retry(self, index: int, cls: RetryClass) -> None:
        op = self.pick(index)
        self.call("retry", op, lambda: self.ledger.retry(op, cls))

    @needs_ops
    @rule(index=st.integers(0, 45), text=st.text(max_size=10))
    def push_chunk(self, index: int, text: str) -> None:
        op = self.pick(index)
        chunk = self.call("push_chunk", op, lambda: self.ledger.push_chunk(op, text))
        if chunk is not None:
            assert chunk.text == redact(text)  # type: ignore[attr-defined]

    @needs_ops
    @rule(index=st.integers(0, 45), value=RESULTS)
    def complete(self, index: int, value: Any) -> None:
        op = self.pick(index)
        outcome = self.call("complete", op, lambda: self.ledger.complete(op, value))
        if outcome is not None:
            assert isinstance(outcome, Completed | Denied | TimedOut)
            self.resolved(op, outcome)

    @needs_ops
    @rule(index=st.integers(0, 45))
    def fail(self, index: int) -> None:
        op = self.pick(index)
        outcome = self.call("fail", op, lambda: self.ledger.fail(op, "boom"))
        if outcome is not None:
            assert isinstance(outcome, Failed | TimedOut)
            self.resolved(op, outcome)

    @needs_ops
    @rule(index=st.integers(0, 45))
    def request_cancellation(self, index: int) -> None:
        op = self.pick(index)
        self.call("request_cancellation", op, lambda: self.ledger.request_cancellation(op))

    @needs_ops
    @rule(index=st.integers(0, 45))
    def confirm_cancellation(self, index: int) -> None:
        op = self.pick(index)
        outcome = self.call(
            "confirm_cancellation", op, lambda: self.ledger.confirm_cancellation(op)
        )
        if outcome is not None:
            self.resolved(op, outcome)

    @needs_ops
    @rule(index=st.integers(0, 45))
    def cancel(self, index: int) -> None:
        op = self.pick(index)
        outcome = self.call("cancel", op, lambda: self.ledger.cancel(op))
        if outcome is not None:
            self.resolved(op, outcome)

    @needs_ops
    @rule(index=st.integers(0, 45))
    def mark_indeterminate(self, index: int) -> None:
        op = self.pick(index)
        self.call("mark_indeterminate", op, lambda: self.ledger.mark_indeterminate(op, "eof"))

    @needs_ops
    @rule(index=st.integers(0, 45), status=STATUSES)
    def reconcile(self, index: int, status: ReconcileStatus) -> None:
        op = self.pick(index)
        outcome = self.call("reconcile", op, lambda: self.ledger.reconcile(op, status))
        if outcome is not None:
            self.resolved(op, outcome)

    @rule()
    def expire(self) -> None:
        for op in self.ledger.expire_timed_out():
            self.resolved(op, TimedOut("expired"))

    @rule(seconds=st.sampled_from([0.5, 2.0, 6.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- invariants -----------------------------------------------------------------------

    def removed(self) -> set[int]:
        """Operations compacted out of the journal (their outcomes may be gone)."""
        journal = self.ledger._journal
        checkpoint = None if journal is None else journal.checkpoint()
        return set() if checkpoint is None else set(range(1, checkpoint.last_op_id + 1))

    @invariant()
    def one_terminal_event_per_finished_operation(self) -> None:
        events = self.ledger.audit()
        terminal = Counter(e.op_id for e in events if e.kind in TERMINAL_KINDS)
        assert all(count == 1 for count in terminal.values()), terminal
        removed = self.removed()
        assert set(terminal) <= set(self.outcomes)
        assert set(self.outcomes) - set(terminal) <= removed  # a restart forgot them
        for op, outcome in self.outcomes.items():
            if op not in removed:
                assert self.ledger.outcome(op) == outcome
                continue
            with contextlib.suppress(AlreadyCompleted):  # gone after a restart
                assert self.ledger.outcome(op) == outcome  # or still held in memory
        assert not removed & {i.id for i in self.ledger.pending()}  # nothing pending goes

    @invariant()
    def pending_is_bounded_and_accounted(self) -> None:
        assert self.ledger.pending_count <= MAX_PENDING
        assert self.ledger.pending_count == len(self.ids) - len(self.outcomes)
        assert {i.id for i in self.ledger.pending() if i.state == "queued"} == self.queued

    @invariant()
    def counters_never_go_back(self) -> None:
        for info in self.ledger.pending():
            now = (info.attempt, info.chunks, info.source_bytes, info.emitted_bytes)
            before = self.progress.get(info.id, (0, 0, 0, 0))
            assert all(a >= b for a, b in zip(now, before, strict=True)), (before, now)
            assert info.attempt <= info.max_attempts
            self.progress[info.id] = now

    @invariant()
    def the_chain_verifies(self) -> None:
        assert self.ledger.verify_audit_chain() >= len(self.ids) - len(self.removed())
        if not self.durable:
            assert self.seen == list(self.ledger.audit())


class DurableLedgerMachine(LedgerMachine):
    durable = True

    @precondition(lambda self: self.ids)
    @rule()
    def restart(self) -> None:
        """The host process dies and a new one opens the journal."""
        before = {i.id: i for i in self.ledger.pending()}
        self.ledger.close()
        self.ledger = self.open()
        after = {i.id: i for i in self.ledger.pending()}
        assert set(after) == set(before)
        for op, info in after.items():
            assert info.indeterminate == (info.state != "queued")
            assert info.attempt == before[op].attempt

    @rule(vacuum=st.booleans())
    def compact(self, vacuum: bool) -> None:
        """Remove what has ended from the journal; nothing pending may go (the replay
        invariant checks that after every rule). The report names the stored checkpoint."""
        report = self.ledger.compact(vacuum=vacuum)
        assert self.ledger._journal is not None
        stored = self.ledger._journal.checkpoint()
        assert report.checkpoint == (None if stored is None else (stored.seq, stored.hash))

    @invariant()
    def the_journal_replays_to_the_same_state(self) -> None:
        """Every journaled event is a legal transition, and replay agrees with memory."""
        from supervisor.ledger.recovery import replay

        assert self.ledger._journal is not None
        found = replay(self.ledger._journal, 1)
        replayed = {
            op: (r.state, r.attempt, r.indeterminate, r.chunks, r.source_bytes, r.emitted_bytes)
            for op, (_, r) in found.live.items()
        }
        assert replayed == {
            i.id: (i.state, i.attempt, i.indeterminate, i.chunks, i.source_bytes, i.emitted_bytes)
            for i in self.ledger.pending()
        }


TestLedgerStateful = LedgerMachine.TestCase
TestLedgerStateful.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestDurableLedgerStateful = DurableLedgerMachine.TestCase
TestDurableLedgerStateful.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
