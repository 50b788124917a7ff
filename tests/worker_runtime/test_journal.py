"""The worker's journal of effectful calls, with real worker processes on real pipes.

Each test runs one or more sessions over the same journal directory, as the supervisor's
sessions of one group do, and counts the effects an adapter really performed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from worker_harness import WorkerProcess

from worker_runtime.protocol.host import ErrorReceived, ReconcileAnswered, ResultReceived
from worker_runtime.protocol.journal import (
    Begun,
    Ended,
    EntryInvalid,
    JournalFailed,
    JournalSucceeded,
    entry_name,
    open_entry,
)
from worker_runtime.protocol.messages import (
    Failed,
    JsonPayload,
    Running,
    Succeeded,
    TextPayload,
    UnknownState,
    grant,
)

ADAPTERS = "journal_adapters:registry"
GRANTS = [
    grant("pay", format="json", max_calls=50),
    grant("note", max_calls=50),
    grant("note.lost", max_calls=50),
    grant("note.hang", max_calls=50),
    grant("plain", max_calls=50),
]
KEY = bytes(range(7, 39))  # the operation's journal key, as the host would derive it


class Rig:
    """A journal directory, an effects directory, and sessions over them."""

    def __init__(self, root: Path) -> None:
        self.journal = root / "journal"
        self.effects = root / "effects"
        self.journal.mkdir()
        self.effects.mkdir()
        self.workers: list[WorkerProcess] = []

    def session(self, *, journal: bool = True, max_in_flight: int = 1) -> WorkerProcess:
        env = {"JOURNAL_TEST_EFFECTS": str(self.effects)}
        if journal:
            env["SANDVISOR_JOURNAL"] = str(self.journal)
        w = WorkerProcess(GRANTS, adapters=[ADAPTERS], env=env, max_in_flight=max_in_flight)
        self.workers.append(w)
        ready = w.handshake()
        assert {t.name for t in ready.tools if t.effectful} == {
            "pay",
            "note",
            "note.lost",
            "note.hang",
        }
        return w

    def effects_of(self, tool: str) -> list[str]:
        path = self.effects / f"{tool}.log"
        return path.read_text().splitlines() if path.exists() else []

    def entry(self, tool: str, key: str, n: int, kind: str) -> Path:
        return self.journal / entry_name(tool, key, n, kind)  # type: ignore[arg-type]

    def close(self) -> None:
        for w in self.workers:
            w.kill()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path)
    try:
        yield made
    finally:
        made.close()


def call(w: WorkerProcess, tool: str, value: Any, key: str, **kw: Any) -> Any:
    w.invoke(tool, value, idempotency_key=key, journal_key=KEY, **kw)
    event = w.next_event()
    assert isinstance(event, ResultReceived | ErrorReceived), (event, w.stderr_text())
    return event


def reconcile(w: WorkerProcess, tool: str, key: str) -> ReconcileAnswered:
    _, line = w.conn.reconcile(tool, key)
    w.send(line)
    event = w.next_event()
    assert isinstance(event, ReconcileAnswered), event
    return event


def test_an_effectful_call_is_journaled_before_and_after_it_runs(rig: Rig) -> None:
    w = rig.session()
    event = call(w, "pay", {"amount": 5}, "order-1")
    assert isinstance(event, ResultReceived) and event.payload.value == {"receipt": "r-5"}
    start = open_entry(KEY, _signed(rig.entry("pay", "order-1", 1, "start")))
    end = open_entry(KEY, _signed(rig.entry("pay", "order-1", 1, "end")))
    assert isinstance(start, Begun) and (start.tool, start.key, start.n, start.attempt) == (
        "pay",
        "order-1",
        1,
        1,
    )
    assert start.session == w.session_id
    assert isinstance(end, Ended) and end.outcome == JournalSucceeded(
        JsonPayload({"receipt": "r-5"})
    )
    # what a later session may read: the entries are readable by others, nothing else left
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in rig.journal.iterdir())
    assert len(list(rig.journal.iterdir())) == 2  # no temporary file left


def test_a_repeated_key_replays_the_answer_in_any_later_session(rig: Rig) -> None:
    first = call(rig.session(), "pay", {"amount": 5}, "order-1")
    again = call(rig.session(), "pay", {"amount": 5}, "order-1")  # a fresh session
    assert isinstance(again, ResultReceived) and again.payload == first.payload
    assert len(rig.effects_of("pay")) == 1
    # the same input in another key order is the same input
    w = rig.session()
    w.invoke("pay", {"note": "x", "amount": 6}, idempotency_key="order-2", journal_key=KEY)
    w.next_event()
    w.invoke("pay", {"amount": 6, "note": "x"}, idempotency_key="order-2", journal_key=KEY)
    assert isinstance(w.next_event(), ResultReceived)
    assert len(rig.effects_of("pay")) == 2


def test_a_final_error_is_replayed_and_a_retryable_one_runs_again(rig: Rig) -> None:
    w = rig.session()
    refused = call(w, "note", "refuse", "k-refuse")
    again = call(w, "note", "refuse", "k-refuse")
    assert isinstance(again, ErrorReceived) and (again.code, again.message) == (
        refused.code,
        refused.message,
    ) == ("refused", "no, never")
    flaky = call(w, "note", "flaky", "k-flaky")
    assert isinstance(flaky, ErrorReceived) and flaky.retryable
    retried = call(w, "note", "flaky", "k-flaky", attempt=2)
    assert isinstance(retried, ResultReceived) and retried.payload.value == "FLAKY"
    assert [line.split()[0] for line in rig.effects_of("note")] == [
        "k-refuse",
        "k-flaky",
        "k-flaky",
    ]
    second = open_entry(KEY, _signed(rig.entry("note", "k-flaky", 2, "start")))
    assert isinstance(second, Begun) and (second.n, second.attempt) == (2, 2)
    failed = open_entry(KEY, _signed(rig.entry("note", "k-flaky", 1, "end")))
    assert isinstance(failed, Ended) and failed.outcome == JournalFailed(
        "unavailable", "not yet", True
    )


def test_another_input_under_the_same_key_is_refused_not_replayed(rig: Rig) -> None:
    w = rig.session()
    call(w, "pay", {"amount": 5}, "order-1")
    other = call(w, "pay", {"amount": 500}, "order-1")
    assert isinstance(other, ErrorReceived) and other.code == "key_reused"
    assert not other.retryable and "order-1" in other.message and "\n" not in other.message
    assert len(rig.effects_of("pay")) == 1


def test_a_lost_answer_is_reconciled_from_the_journal_by_a_fresh_session(rig: Rig) -> None:
    w = rig.session()
    w.invoke("note.lost", "parcel", idempotency_key="ship-1", journal_key=KEY)
    assert w.next_event() is None  # EOF: the worker died before its answer
    assert w.wait() == 2
    fresh = rig.session()
    answer = reconcile(fresh, "note.lost", "ship-1")
    assert answer.status == Succeeded(TextPayload("done:parcel"))
    assert answer.journal is not None and len(answer.journal) == 2
    start, end = (open_entry(KEY, e) for e in answer.journal)  # the host's check
    assert isinstance(start, Begun) and start.session == w.session_id
    assert isinstance(end, Ended) and end.outcome == JournalSucceeded(TextPayload("done:parcel"))
    replayed = call(fresh, "note.lost", "parcel", "ship-1")  # does not run (or close fd 4)
    assert isinstance(replayed, ResultReceived) and replayed.payload.value == "done:parcel"
    assert len(rig.effects_of("note.lost")) == 1


def test_a_run_that_never_ended_is_running_and_never_runs_again(rig: Rig) -> None:
    w = rig.session()
    w.invoke("note.hang", "x", idempotency_key="k-hang", journal_key=KEY)
    _wait_for(lambda: rig.effects_of("note.hang"))
    w.kill()
    fresh = rig.session()
    answer = reconcile(fresh, "note.hang", "k-hang")
    assert answer.status == Running() and answer.journal is not None and len(answer.journal) == 1
    assert isinstance(open_entry(KEY, answer.journal[0]), Begun)
    refused = call(fresh, "note.hang", "x", "k-hang")
    assert isinstance(refused, ErrorReceived) and refused.code == "in_doubt"
    assert "never ended" in refused.message and not refused.retryable
    assert len(rig.effects_of("note.hang")) == 1


def test_a_call_in_flight_here_is_running_with_its_start(rig: Rig) -> None:
    w = rig.session(max_in_flight=2)
    w.invoke("note.hang", "x", idempotency_key="k-live", journal_key=KEY)
    _wait_for(lambda: rig.effects_of("note.hang"))
    answer = reconcile(w, "note.hang", "k-live")
    assert answer.status == Running() and answer.journal is not None and len(answer.journal) == 1


def test_reconcile_of_a_key_never_journaled_is_unknown_without_entries(rig: Rig) -> None:
    w = rig.session()
    answer = reconcile(w, "pay", "never-seen")
    assert (answer.status, answer.journal) == (UnknownState(), None)
    call(w, "plain", "hello", "k-plain")
    plain = reconcile(w, "plain", "k-plain")  # not effectful: the session's memory, no entries
    assert plain.status == Succeeded(TextPayload("hello")) and plain.journal is None


def test_a_tampered_entry_is_refused_by_the_worker_and_fails_the_hosts_check(rig: Rig) -> None:
    call(rig.session(), "pay", {"amount": 5}, "order-1")
    end = rig.entry("pay", "order-1", 1, "end")
    end.write_bytes(end.read_bytes().replace(b"r-5", b"r-9"))
    w = rig.session()
    refused = call(w, "pay", {"amount": 5}, "order-1")
    assert isinstance(refused, ErrorReceived) and refused.code == "journal_tampered"
    assert refused.message.startswith(f"journal entry {end.name} fails its check")
    assert "\n" not in refused.message
    answer = reconcile(w, "pay", "order-1")
    assert answer.status == Succeeded(JsonPayload({"receipt": "r-9"}))  # what the file says
    assert answer.journal is not None
    with pytest.raises(EntryInvalid):
        open_entry(KEY, answer.journal[1])
    assert len(rig.effects_of("pay")) == 1


@pytest.mark.parametrize("junk", ["symlink", "fifo", "garbage"])
def test_anything_else_in_an_entrys_place_is_refused(rig: Rig, junk: str) -> None:
    start = rig.entry("pay", "order-1", 1, "start")
    if junk == "symlink":
        os.symlink("/etc/passwd", start)
    elif junk == "fifo":
        os.mkfifo(start)
    else:
        start.write_bytes(b"not an entry\n")
    w = rig.session()
    refused = call(w, "pay", {"amount": 5}, "order-1")
    assert isinstance(refused, ErrorReceived) and refused.code == "journal_tampered"
    answer = reconcile(w, "pay", "order-1")
    assert answer.journal is not None
    with pytest.raises(EntryInvalid):
        open_entry(KEY, answer.journal[0])
    assert rig.effects_of("pay") == []


def test_without_a_journal_an_effectful_tool_does_not_run(rig: Rig) -> None:
    w = rig.session(journal=False)
    refused = call(w, "pay", {"amount": 5}, "order-1")
    assert isinstance(refused, ErrorReceived) and refused.code == "journal_unavailable"
    w2 = rig.session()
    w2.invoke("pay", {"amount": 5}, idempotency_key="order-1")  # no journal key
    refused = w2.next_event()
    assert isinstance(refused, ErrorReceived) and refused.code == "journal_unavailable"
    assert rig.effects_of("pay") == []
    assert isinstance(call(w2, "plain", "hi", "k"), ResultReceived)  # others run as ever


def test_a_journal_directory_that_cannot_be_opened_stops_the_worker(rig: Rig) -> None:
    w = WorkerProcess(
        GRANTS,
        adapters=[ADAPTERS],
        env={"SANDVISOR_JOURNAL": str(rig.journal / "missing"), "JOURNAL_TEST_EFFECTS": "/"},
    )
    rig.workers.append(w)
    w.bootstrap()
    assert w.wait() == 3
    assert "journal directory" in w.stderr_text()


def _signed(path: Path) -> Any:
    from worker_runtime.protocol.journal import split_line

    return split_line(path.read_bytes())


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_reconcile_of_a_failed_run_says_failed_with_its_entries(rig: Rig) -> None:
    w = rig.session()
    call(w, "note", "refuse", "k-refuse")
    answer = reconcile(rig.session(), "note", "k-refuse")
    assert answer.status == Failed("no, never")
    assert answer.journal is not None and len(answer.journal) == 2
