"""Crash recovery with real processes: a host is SIGKILLed mid-flight and a new one reopens
its journal. Nothing claimed is lost or handed out again; what was never committed is gone
as a whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.ledger import (
    Cancelled,
    Completed,
    Ledger,
    OperationState,
    ReconcileStatus,
    StreamPolicy,
    TimedOut,
    ToolPolicy,
)

CHILD = Path(__file__).with_name("crash_child.py")
TOOL = ToolPolicy(
    "text.remote", max_calls=1_000_000, max_attempts=3, deadline=60.0, stream=StreamPolicy()
)


class Host:
    """A child host process whose JSON lines can be read, and which can be killed."""

    def __init__(self, journal: Path, scenario: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(journal), scenario],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            pytest.fail(f"the child host died: {self.proc.stderr.read()}")
        result: dict[str, Any] = json.loads(line)
        return result

    def kill(self) -> list[dict[str, Any]]:
        """SIGKILL, reap, and return whatever it had reported but not yet been read."""
        os.kill(self.proc.pid, signal.SIGKILL)
        out, _ = self.proc.communicate(timeout=10)
        assert self.proc.returncode == -signal.SIGKILL
        return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "host.sqlite3"


def reopen(journal: Path, wall_shift: float = 0.0) -> Ledger:
    ledger = Ledger(
        path=journal, max_pending=1_000_000, wall_clock=lambda: time.time() + wall_shift
    )
    ledger.register_external_tool(TOOL)
    return ledger


def test_claimed_operations_survive_sigkill_as_indeterminate(journal: Path) -> None:
    host = Host(journal, "in_flight")
    report = host.read()
    host.kill()
    ops: dict[str, int] = report["ready"]
    keys: dict[str, str] = report["keys"]

    ledger = reopen(journal)
    ledger.verify_audit_chain()
    pending = {info.id: info for info in ledger.pending()}
    assert set(pending) == {ops[n] for n in ("queued", "claimed", "retried", "cancel_requested")}
    for name in ("claimed", "retried", "cancel_requested"):
        info = pending[ops[name]]
        assert info.indeterminate, name
        assert info.idempotency_key == keys[name]  # a reconcile asks about the same key
    assert pending[ops["retried"]].attempt == 2
    assert pending[ops["retried"]].chunks == 1
    assert pending[ops["cancel_requested"]].state == OperationState.CANCELLATION_REQUESTED
    assert ledger.outcome(ops["completed"]) == Completed("finished before the crash")
    recovered = {e.op_id for e in ledger.audit() if e.kind == "recovered_indeterminate"}
    assert recovered == {ops["claimed"], ops["retried"], ops["cancel_requested"]}

    # Only the operation that was never dispatched is handed out again.
    inv = ledger.claim_next()
    assert inv is not None and inv.id == ops["queued"]
    assert inv.idempotency_key == keys["queued"] and inv.value == "input of queued"
    assert ledger.claim_next() is None

    # A fresh worker session's reconcile resolves some; the deadline resolves the rest.
    assert ledger.reconcile(ops["claimed"], ReconcileStatus.succeeded("it had happened")) == (
        Completed("it had happened")
    )
    assert ledger.reconcile(ops["cancel_requested"], ReconcileStatus.cancelled()) == (
        Cancelled("reconciled")
    )
    ledger.close()

    later = reopen(journal, wall_shift=120.0)
    assert sorted(later.expire_timed_out()) == sorted([ops["retried"], ops["queued"]])
    assert later.outcome(ops["retried"]) == TimedOut("expired")
    assert later.pending_count == 0
    later.verify_audit_chain()
    later.close()


def test_an_uncommitted_batch_vanishes_as_a_whole(journal: Path) -> None:
    host = Host(journal, "batch")
    report = host.read()["in_batch"]
    host.kill()
    ledger = reopen(journal)
    pending = ledger.pending()
    assert [(i.id, i.state) for i in pending] == [(report["committed"], "queued")]
    # The lost ids were never durable, so they do not exist (and ids are reused safely:
    # no worker ever saw them, because nothing in a batch is acted on before it commits).
    assert ledger.start("text.remote", "after") == report["lost"][0]
    ledger.close()


@pytest.mark.parametrize("rounds", [(0.05, 0.17, 0.29)])
def test_a_host_killed_at_arbitrary_moments_recovers_a_consistent_journal(
    journal: Path, rounds: tuple[float, ...]
) -> None:
    """Each round a new host continues the same journal, churns, and is killed wherever it
    happens to be: inside a write, a commit, between transitions."""
    claimed: set[int] = set()
    for delay in rounds:
        host = Host(journal, "churn")
        while host.read() != {"running": True}:
            pass
        time.sleep(delay)
        claimed |= {line["claimed"] for line in host.kill() if "claimed" in line}

        ledger = reopen(journal)
        ledger.verify_audit_chain()
        for op_id in claimed:
            # Every claim the host saw return was durable: resolved, or indeterminate.
            if ledger.outcome(op_id) is None:
                assert ledger.status(op_id).indeterminate
        for info in ledger.pending():
            assert info.indeterminate == (info.state != OperationState.QUEUED)
        queued = [i.id for i in ledger.pending() if i.state == OperationState.QUEUED]
        handed_out = []
        while (inv := ledger.claim_next()) is not None:
            handed_out.append(inv.id)
        assert handed_out == queued  # and never anything that was claimed
        ledger.close()
