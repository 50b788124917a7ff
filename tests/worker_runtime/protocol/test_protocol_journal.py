"""Spec section 11 on the wire: journal entries, the journal key in `invoke`, and the shape
of a `reconciled` answer that relays entries."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from proto_fixtures import GRANTS, HostSide, WorkerSide

from worker_runtime.protocol.errors import ProtocolError, Refused, UnexpectedMessage
from worker_runtime.protocol.host import ReconcileAnswered
from worker_runtime.protocol.journal import (
    Begun,
    Ended,
    EntryInvalid,
    JournalCancelled,
    JournalFailed,
    JournalSucceeded,
    entry_name,
    input_digest,
    open_entry,
    relayed_status,
    seal_entry,
    split_line,
)
from worker_runtime.protocol.messages import (
    CancelledState,
    Failed,
    Invoke,
    Ready,
    Reconciled,
    Running,
    SignedEntry,
    Succeeded,
    TextPayload,
    ToolSpec,
    UnknownState,
)
from worker_runtime.protocol.worker import InvokeReceived

KEY = bytes(range(32))
START = Begun("text.upper", "op-1", 1, 1, "ab" * 32, "sv-test", 1.5)
END = Ended("text.upper", "op-1", 1, "sv-test", 2.5, JournalSucceeded(TextPayload("HI")))


def signed(entry: Any, key: bytes = KEY) -> SignedEntry:
    return split_line(seal_entry(key, entry))


# -- entries ----------------------------------------------------------------------------


def test_an_entry_opens_only_with_its_key_and_its_exact_bytes() -> None:
    line = seal_entry(KEY, END)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert open_entry(KEY, split_line(line)) == END
    with pytest.raises(EntryInvalid, match="tag does not match"):
        open_entry(bytes(32), split_line(line))
    altered = line.replace(b'"HI"', b'"HO"')
    with pytest.raises(EntryInvalid):
        open_entry(KEY, split_line(altered))
    spaced = line.replace(b'"n":1', b'"n": 1')  # the same JSON, other bytes
    with pytest.raises(EntryInvalid):
        open_entry(KEY, split_line(spaced))


def test_a_tagged_body_that_is_not_an_entry_is_refused() -> None:
    from worker_runtime.protocol.journal import tag_of

    body = b'{"kind":"start","tool":"t"}'
    forged = SignedEntry(tag_of(KEY, body), msgspec.Raw(body))
    with pytest.raises(EntryInvalid, match="not a journal entry"):
        open_entry(KEY, forged)


@pytest.mark.parametrize(
    "line",
    [b"", b"junk\n", b"x" * 64 + b" not json\n", b"A" * 64 + b' {"a":1}\n', b"0" * 64 + b" [1]\n"],
)
def test_a_line_that_is_not_an_entry_is_relayed_as_a_string_no_tag_matches(line: bytes) -> None:
    relayed = split_line(line)
    assert msgspec.json.decode(bytes(relayed.body)) == line.decode()
    with pytest.raises(EntryInvalid):
        open_entry(KEY, relayed)


def test_names_and_digests() -> None:
    assert entry_name("t", "k", 3, "end").endswith(".3.end")
    assert entry_name("t", "k", 1, "start") != entry_name("t.k", "", 1, "start")
    assert len(entry_name("t" * 128, "k" * 128, 64, "start")) < 255
    assert input_digest("json", {"a": 1, "b": 2}) == input_digest("json", {"b": 2, "a": 1})
    assert input_digest("json", {"a": 1}) != input_digest("text", {"a": 1})


@pytest.mark.parametrize(
    ("entries", "status"),
    [
        ([], UnknownState()),
        ([START], Running()),
        ([START, END], Succeeded(TextPayload("HI"))),
        (
            [START, Ended("t", "k", 1, "s", 1.0, JournalFailed("nope", "no", False))],
            Failed("no"),
        ),
        ([START, Ended("t", "k", 1, "s", 1.0, JournalCancelled())], CancelledState()),
    ],
)
def test_the_status_a_worker_relays_follows_its_entries(entries: list[Any], status: Any) -> None:
    assert relayed_status([signed(e) for e in entries]) == status


# -- invoke: the journal key -------------------------------------------------------------


def test_invoke_carries_the_journal_key_as_hex_or_null() -> None:
    side = HostSide().opened()
    _, line = side.host.invoke("text.upper", "hi", idempotency_key="op-1", journal_key=KEY)
    msg = side.read(line)
    assert isinstance(msg, Invoke) and msg.journal_key == KEY.hex()
    _, line = side.host.invoke("text.upper", "hi", idempotency_key="op-2")
    msg = side.read(line)
    assert isinstance(msg, Invoke) and msg.journal_key is None


@pytest.mark.parametrize("bad", [b"short", "ab" * 32, bytes(33)])
def test_invoke_refuses_a_journal_key_that_is_not_32_bytes(bad: Any) -> None:
    side = HostSide().opened()
    with pytest.raises(Refused) as info:
        side.host.invoke("text.upper", "hi", idempotency_key="op-1", journal_key=bad)
    assert info.value.code == "bad_journal_key"


def test_the_worker_hands_the_journal_key_to_its_driver() -> None:
    side = WorkerSide().opened()
    event = side.say(
        Invoke,
        rid="r1",
        tool="text.upper",
        payload=TextPayload("hi"),
        attempt=1,
        idempotency_key="op-1",
        deadline_ms=None,
        journal_key=KEY.hex(),
    )
    assert isinstance(event, InvokeReceived) and event.journal_key == KEY.hex()


@pytest.mark.parametrize("bad", ["AB" * 32, "ab" * 31, "zz" * 32])
def test_a_malformed_journal_key_is_fatal_for_the_worker(bad: str) -> None:
    side = WorkerSide().opened()
    with pytest.raises(ProtocolError):
        side.say(
            Invoke,
            rid="r1",
            tool="text.upper",
            payload=TextPayload("hi"),
            attempt=1,
            idempotency_key="op-1",
            deadline_ms=None,
            journal_key=bad,
        )


# -- reconciled: the entries' shape ---------------------------------------------------------


def effectful_side() -> HostSide:
    side = HostSide()
    side.read(side.host.open())
    tools = [ToolSpec(g.tool, g.format, effectful=g.tool == "text.upper") for g in GRANTS]
    side.say(Ready, tools=tools, impl="raw", version="0")
    return side


def answer(side: HostSide, tool: str, status: Any, journal: list[Any] | None) -> Any:
    rid, _ = side.host.reconcile(tool, "op-1")
    entries = None if journal is None else [signed(e) for e in journal]
    return side.say(
        Reconciled, rid=rid, tool=tool, operation_key="op-1", status=status, journal=entries
    )


@pytest.mark.parametrize(
    ("status", "journal"),
    [
        (UnknownState(), None),
        (Running(), None),
        (Running(), [START]),
        (Succeeded(TextPayload("HI")), [START, END]),
        (Failed("no"), [START, END]),  # the shape only: the host checks the content later
        (CancelledState(), [START, END]),
    ],
)
def test_an_effectful_tools_answer_with_the_right_entries_is_accepted(
    status: Any, journal: list[Any] | None
) -> None:
    side = effectful_side()
    event = answer(side, "text.upper", status, journal)
    assert isinstance(event, ReconcileAnswered) and event.status == status
    assert event.journal == (None if journal is None else [signed(e) for e in journal])


@pytest.mark.parametrize(
    ("tool", "status", "journal"),
    [
        ("text.upper", Succeeded(TextPayload("HI")), None),  # a terminal status needs proof
        ("text.upper", Succeeded(TextPayload("HI")), [START]),
        ("text.upper", Failed("no"), None),
        ("text.upper", CancelledState(), [END]),
        ("text.upper", UnknownState(), [START]),
        ("text.upper", Running(), [START, END]),
        ("json.echo", Running(), [START]),  # entries for a tool that is not effectful
    ],
)
def test_an_answer_whose_entries_do_not_fit_its_status_is_fatal(
    tool: str, status: Any, journal: list[Any] | None
) -> None:
    side = effectful_side()
    with pytest.raises(UnexpectedMessage):
        answer(side, tool, status, journal)
    assert side.host.dead


def test_more_than_two_entries_are_refused_at_decode() -> None:
    side = effectful_side()
    with pytest.raises(ProtocolError):
        answer(side, "text.upper", Succeeded(TextPayload("HI")), [START, END, END])


def test_the_worker_relays_entries_and_says_running_for_its_own_call() -> None:
    side = WorkerSide().opened()
    side.invoke(key="op-1")
    side.reconcile("q2", "op-1")
    (msg,) = side.read(side.worker.reconciled("q2", [signed(START)]))
    assert isinstance(msg, Reconciled) and msg.status == Running()
    assert msg.journal == [signed(START)]
    side.reconcile("q3", "op-2")
    (msg,) = side.read(side.worker.reconciled("q3", [signed(START), signed(END)]))
    assert isinstance(msg, Reconciled) and msg.status == Succeeded(TextPayload("HI"))
    side.reconcile("q4", "op-3")
    (msg,) = side.read(side.worker.reconciled("q4", []))
    assert isinstance(msg, Reconciled) and (msg.status, msg.journal) == (UnknownState(), None)
