"""Streaming: opt-in, bounded over all attempts, redacted, audited, never retained."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from ledger_helpers import FakeClock, kinds

from supervisor.ledger import (
    AlreadyReserved,
    DeadlineElapsed,
    InvalidOutput,
    Ledger,
    PolicyError,
    RedactorFailed,
    RetryClass,
    StreamingDisabled,
    StreamLimitExceeded,
    StreamPolicy,
    ToolPolicy,
    UnknownTool,
)


def redact(text: str) -> str:
    return text.replace("secret", "[redacted]")


@pytest.fixture
def streaming(ledger_factory: Any) -> Ledger:
    ledger: Ledger = ledger_factory()
    ledger.register_external_tool(
        ToolPolicy(
            "text.remote",
            max_calls=10,
            max_attempts=3,
            deadline=5.0,
            stream=StreamPolicy(
                max_chunks=3, max_chunk_bytes=8, max_total_bytes=12, max_emitted_bytes=12
            ),
        )
    )
    ledger.set_stream_redactor("text.remote", redact)
    return ledger


def claimed(ledger: Ledger) -> int:
    op = ledger.start("text.remote", "go")
    ledger.claim(op)
    return op


def test_streams_are_redacted_bounded_and_audited(streaming: Ledger) -> None:
    op = claimed(streaming)
    chunk = streaming.push_chunk(op, "secret")
    assert (chunk.index, chunk.text, chunk.source_bytes, chunk.emitted_bytes) == (
        1,
        "[redacted]",
        6,
        10,
    )
    with pytest.raises(StreamLimitExceeded, match="max_emitted_bytes"):
        streaming.push_chunk(op, "abc")  # 10 + 3 emitted > 12
    with pytest.raises(StreamLimitExceeded, match="max_chunk_bytes"):
        streaming.push_chunk(op, "123456789")
    assert streaming.push_chunk(op, "ab").index == 2
    with pytest.raises(StreamLimitExceeded, match="max_total_bytes"):
        streaming.push_chunk(op, "12345")  # 8 source bytes so far + 5 > 12
    assert streaming.push_chunk(op, "").index == 3
    with pytest.raises(StreamLimitExceeded, match="max_chunks"):
        streaming.push_chunk(op, "")
    events = [
        (e.kind, e.bytes_in, e.bytes_out, e.detail)
        for e in streaming.audit()
        if e.kind in ("streamed", "stream_denied")
    ]
    assert events == [
        ("streamed", 6, 10, "1"),
        ("stream_denied", 3, 3, "max_emitted_bytes"),
        ("stream_denied", 9, 0, "max_chunk_bytes"),
        ("streamed", 2, 2, "2"),
        ("stream_denied", 5, 0, "max_total_bytes"),
        ("streamed", 0, 0, "3"),
        ("stream_denied", 0, 0, "max_chunks"),
    ]
    info = streaming.status(op)
    assert (info.chunks, info.source_bytes, info.emitted_bytes) == (3, 8, 12)
    assert streaming.complete(op, "final result is separate").status == "completed"


def test_stream_limits_span_retry_attempts(streaming: Ledger) -> None:
    op = claimed(streaming)
    streaming.push_chunk(op, "12345678")
    assert streaming.retry(op, RetryClass.TRANSIENT).attempt == 2
    streaming.push_chunk(op, "1234")
    streaming.retry(op, RetryClass.TRANSIENT)
    with pytest.raises(StreamLimitExceeded, match="max_total_bytes"):
        streaming.push_chunk(op, "1")
    info = streaming.status(op)
    assert (info.attempt, info.chunks, info.source_bytes) == (3, 2, 12)


def test_streaming_requires_an_explicit_policy(ledger: Ledger) -> None:
    op = ledger.start("text.once", "x")
    ledger.claim(op)
    with pytest.raises(StreamingDisabled):
        ledger.push_chunk(op, "progress")
    assert kinds(ledger, op)[-1] == "stream_denied"
    assert ledger.audit()[-1].detail == "streaming_disabled"


def test_expired_operations_cannot_release_chunks(streaming: Ledger, clock: FakeClock) -> None:
    op = claimed(streaming)
    clock.advance(5)
    before = kinds(streaming)
    with pytest.raises(DeadlineElapsed):
        streaming.push_chunk(op, "late")
    assert kinds(streaming) == before
    streaming.expire_timed_out()
    from supervisor.ledger import AlreadyCompleted

    with pytest.raises(AlreadyCompleted):
        streaming.push_chunk(op, "later")


def test_chunk_text_is_not_retained(streaming: Ledger, mode: str) -> None:
    op = claimed(streaming)
    text = "".join(["marker", "42"])  # a fresh object, not an interned constant
    references = sys.getrefcount(text)
    chunk = streaming.push_chunk(op, text)
    assert chunk.text == text  # nothing to redact: the host sees the text itself ...
    del chunk
    assert sys.getrefcount(text) == references  # ... and the ledger keeps no reference
    assert all("marker42" not in e.detail for e in streaming.audit())
    if mode == "durable":
        journal = streaming._journal
        assert journal is not None
        streaming.close()
        for suffix in ("", "-wal"):
            path = Path(journal.path + suffix)
            if path.exists():
                assert b"marker42" not in path.read_bytes()


def test_a_failing_redactor_releases_nothing(ledger_factory: Any) -> None:
    ledger: Ledger = ledger_factory()
    ledger.register_external_tool(
        ToolPolicy("t", stream=StreamPolicy()), redactor=lambda text: 1 / 0
    )  # type: ignore[arg-type,return-value]
    op = ledger.start("t", "x")
    ledger.claim(op)
    with pytest.raises(RedactorFailed):
        ledger.push_chunk(op, "secret")
    assert ledger.audit()[-1].detail == "redactor_failed"
    assert ledger.status(op).chunks == 0


def test_a_redactor_must_return_text(ledger_factory: Any) -> None:
    ledger: Ledger = ledger_factory()
    ledger.register_external_tool(
        ToolPolicy("t", stream=StreamPolicy()), redactor=lambda text: None
    )  # type: ignore[arg-type,return-value]
    op = ledger.start("t", "x")
    ledger.claim(op)
    with pytest.raises(RedactorFailed, match="returned NoneType"):
        ledger.push_chunk(op, "x")


@pytest.mark.parametrize("text", [b"bytes", "\udc80"])
def test_a_chunk_must_be_text(streaming: Ledger, text: Any) -> None:
    op = claimed(streaming)
    with pytest.raises(InvalidOutput):
        streaming.push_chunk(op, text)
    assert streaming.audit()[-1].kind == "stream_denied"


def test_the_redactor_is_fixed_once_the_tool_is_started(ledger: Ledger) -> None:
    ledger.set_stream_redactor("text.echo", redact)
    ledger.start("text.echo", "x")
    with pytest.raises(AlreadyReserved):
        ledger.set_stream_redactor("text.echo", str.upper)


def test_a_redactor_needs_a_streaming_registered_tool(ledger: Ledger) -> None:
    with pytest.raises(StreamingDisabled):
        ledger.set_stream_redactor("text.once", redact)
    with pytest.raises(UnknownTool):
        ledger.set_stream_redactor("no.such", redact)
    with pytest.raises(PolicyError):
        ledger.set_stream_redactor("text.echo", "not callable")  # type: ignore[arg-type]
    with pytest.raises(StreamingDisabled):
        ledger.register_external_tool(ToolPolicy("plain"), redactor=redact)
