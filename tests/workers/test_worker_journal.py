"""The workers' journals with real sandboxes: reconciliation that can say something.

An effectful adapter's effects are counted in a directory the test reads; a worker that
dies after its effect and before its answer, and a host killed with calls in flight, are
reconciled through fresh sessions from what the worker journaled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from journal_rig import CALLS, effects_dir, effects_of, journaled, journaled_policy
from sv_support import EXAMPLES

from sandbox import Bind
from supervisor import DuplicateOperation, JournalFull, JournalTampered
from supervisor.ledger import AuditKind, Completed
from supervisor.workers.supervisor import Supervisor
from supervisor.workers.worker_journal import JOURNAL_DEST, JournalError
from worker_runtime.protocol.journal import entry_name

HERE = Path(__file__).resolve().parent


def group_dir(journal: Path, group: str = "default") -> Path:
    return journal / "groups" / group


async def test_a_worker_killed_after_its_effect_is_reconciled_to_its_recorded_value(
    tmp_path: Path,
) -> None:
    effects = effects_dir(tmp_path)
    async with journaled(effects, journal_dir=tmp_path / "journal") as sup:
        lost = await sup.invoke("ship.lost", "parcel", idempotency_key="ship-1")
        assert (lost.status, lost.kill_reason) == ("indeterminate", "crash:exit:2")
        assert effects_of(effects, "ship.lost") == ["ship-1 1 'parcel'"]
        # a fresh session answers from the journal: the value the dead worker recorded
        assert await sup.reconcile(lost.op_id) == Completed("shipped:parcel")
        again = await sup.invoke("ship.lost", "parcel", idempotency_key="ship-1")
        assert (again.status, again.value) == ("completed", "shipped:parcel")
        assert len(effects_of(effects, "ship.lost")) == 1  # not run twice
        other = await sup.invoke("ship.lost", "crate", idempotency_key="ship-1")
        assert (other.status, other.error_code) == ("failed", "key_reused")
        assert len(effects_of(effects, "ship.lost")) == 1
        assert sup.ledger.verify_audit_chain() > 0


async def test_a_host_restart_reconciles_every_operation_it_had_in_flight(tmp_path: Path) -> None:
    effects = effects_dir(tmp_path)
    ledger, journal = tmp_path / "ops.sqlite3", tmp_path / "journal"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, str(HERE / "journal_host.py"), str(ledger), str(journal), str(effects)]
    host = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    try:
        assert host.stdout is not None
        ops = json.loads(host.stdout.readline())  # every effect has happened
        os.kill(host.pid, signal.SIGSTOP)  # the host hears nothing more
        (effects / "go").touch()  # ship.gated answers: journaled, never heard
        tool, _, key = CALLS["a"]
        end = group_dir(journal) / entry_name(tool, key, 1, "end")
        deadline = time.monotonic() + 30
        while not end.exists():
            assert time.monotonic() < deadline, "ship.gated never journaled its end"
            time.sleep(0.01)
    finally:
        host.kill()
        host.wait()
    async with journaled(effects, ledger_path=ledger, journal_dir=journal) as sup:
        ledger_ = sup.ledger
        assert ledger_.outcome(ops["a"]) == Completed("shipped:a")
        observed = {
            e.op_id: e.detail for e in ledger_.audit() if e.kind == AuditKind.RECONCILE_OBSERVED
        }
        assert observed == {ops["b"]: "running", ops["c"]: "unknown"}
        assert {i.id for i in ledger_.indeterminate()} == {ops["b"], ops["c"]}
        # the recorded answer is replayed, the one in doubt is not run again
        again = await sup.invoke("ship.gated", "a", idempotency_key="order-a")
        assert (again.status, again.value) == ("completed", "shipped:a")
        with pytest.raises(DuplicateOperation):  # its key is still held
            await sup.invoke("ship.hang", "b", idempotency_key="order-b")
        ledger_.fail(ops["b"], "given up by the operator")
        doubt = await sup.invoke("ship.hang", "b", idempotency_key="order-b")
        assert (doubt.status, doubt.error_code) == ("failed", "in_doubt")
        assert ledger_.verify_audit_chain() > 0
    for name in ("a", "b"):
        assert len(effects_of(effects, CALLS[name][0])) == 1


async def test_a_tampered_entry_is_refused_with_one_line(tmp_path: Path) -> None:
    effects = effects_dir(tmp_path)
    journal = tmp_path / "journal"
    async with journaled(effects, journal_dir=journal) as sup:
        lost = await sup.invoke("ship.lost", "parcel", idempotency_key="ship-1")
        end = group_dir(journal) / entry_name("ship.lost", "ship-1", 1, "end")
        end.write_bytes(end.read_bytes().replace(b"shipped:parcel", b"shipped:nothing"))
        with pytest.raises(JournalTampered) as refused:
            await sup.reconcile(lost.op_id)
        message = str(refused.value)
        assert "\n" not in message and "ship.lost ship-1" in message
        assert "end entry fails its check" in message
        assert sup.ledger.status(lost.op_id).indeterminate  # the answer changed nothing
        with pytest.raises(DuplicateOperation):  # its key stays held
            await sup.invoke("ship.lost", "parcel", idempotency_key="ship-1")
        sup.ledger.fail(lost.op_id, "given up by the operator")
        again = await sup.invoke("ship.lost", "parcel", idempotency_key="ship-1")
        assert (again.status, again.error_code) == ("failed", "journal_tampered")
        assert len(effects_of(effects, "ship.lost")) == 1


async def test_the_journal_is_bound_only_where_a_tool_is_effectful_and_nowhere_else(
    tmp_path: Path,
) -> None:
    effects = effects_dir(tmp_path)
    async with Supervisor(
        adapters=[EXAMPLES], journal_dir=tmp_path / "plain", ping_interval=None
    ) as sup:
        assert sup.group("default").journal is None
        assert sup.specs["text.upper"].effectful is False
    assert not (tmp_path / "plain").exists()
    async with journaled(effects, journal_dir=tmp_path / "journal") as sup:
        journal = sup.group("default").journal
        assert journal is not None
        assert journal.effectful == {"pay", "ship.lost", "ship.gated", "ship.hang"}
        assert journal.bind() == Bind(str(group_dir(tmp_path / "journal")), JOURNAL_DEST, True)
        assert (await sup.invoke("echo", "x")).status == "completed"
        assert (await sup.invoke("pay", {"amount": 2})).value == {"receipt": "r-2"}
    # the root key stays the host's: 0600, never bound; the group's entries are readable
    assert (tmp_path / "journal" / "key").stat().st_mode & 0o777 == 0o600


async def test_a_journal_that_overlaps_another_bind_or_is_in_use_is_refused(
    tmp_path: Path,
) -> None:
    effects = effects_dir(tmp_path)
    inside = tmp_path / "journal" / "groups"
    inside.mkdir(parents=True, mode=0o755)
    policy = journaled_policy(effects).replace(
        binds=(*journaled_policy(effects).binds, Bind(str(inside), "/data"))
    )
    with pytest.raises(JournalError, match="overlaps its worker journal"):
        async with journaled(effects, journal_dir=tmp_path / "journal", policy=policy):
            pass
    async with journaled(effects, journal_dir=tmp_path / "journal"):
        with pytest.raises(JournalError, match="in use by another supervisor"):
            async with journaled(effects, journal_dir=tmp_path / "journal"):
                pass


async def test_the_journal_is_compacted_with_the_ledger_and_bounded(tmp_path: Path) -> None:
    effects = effects_dir(tmp_path)
    journal = tmp_path / "journal"
    async with journaled(
        effects, ledger_path=tmp_path / "ops.sqlite3", journal_dir=journal, journal_limit=2
    ) as sup:
        for n in (1, 2):
            assert (await sup.invoke("pay", {"amount": n}, idempotency_key=f"o-{n}")).value
        with pytest.raises(JournalFull, match=r"holds 2 operations \(journal_limit 2\)"):
            await sup.invoke("pay", {"amount": 3}, idempotency_key="o-3")
        assert len(list(group_dir(journal).iterdir())) == 4
        report = sup.compact()
        assert ("pay", "o-1") in report.removed and ("pay", "o-2") in report.removed
        assert list(group_dir(journal).iterdir()) == []
        assert (await sup.invoke("pay", {"amount": 3}, idempotency_key="o-3")).status == (
            "completed"
        )
    # the default root of a durable ledger is beside it
    async with journaled(effects, ledger_path=tmp_path / "other.sqlite3") as sup:
        out = await sup.invoke("pay", {"amount": 4})
        assert out.status == "completed", out
    assert (tmp_path / "other.sqlite3.workers" / "groups" / "default").is_dir()
