"""Policies, registration, start-time checks and idempotency keys."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from ledger_helpers import kinds

from supervisor.ledger import (
    AlreadyRegistered,
    CallBudgetExhausted,
    EntropyUnavailable,
    InvalidInput,
    Ledger,
    PendingLimitReached,
    PolicyError,
    RetryClass,
    SessionNonce,
    StreamPolicy,
    ToolPolicy,
    UnknownTool,
)

KEY_GRAMMAR = re.compile(r"[a-z0-9._-]{1,128}")


# -- policies -----------------------------------------------------------------------------


def test_tool_policy_defaults_follow_the_reference() -> None:
    policy = ToolPolicy("text.remote")
    assert (
        policy.format,
        policy.max_calls,
        policy.max_attempts,
        policy.max_input_bytes,
        policy.max_output_bytes,
        policy.deadline,
        policy.stream,
        policy.contract,
    ) == ("text", 1, 1, 16384, 65536, None, None, None)
    assert StreamPolicy().as_tuple() == (64, 8192, 65536, 65536)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "Bad Name"},
        {"name": ""},
        {"name": "x" * 129},
        {"name": "ünicode"},
        {"name": "t", "format": "xml"},
        {"name": "t", "max_calls": 0},
        {"name": "t", "max_attempts": -1},
        {"name": "t", "max_input_bytes": 0},
        {"name": "t", "max_output_bytes": 1.5},
        {"name": "t", "max_calls": True},
        {"name": "t", "deadline": 0},
        {"name": "t", "deadline": float("inf")},
        {"name": "t", "deadline": "5"},
        {"name": "t", "stream": (1, 2, 3, 4)},
        {"name": "t", "contract": {"type": "object"}},
        {"name": "t", "format": "json", "contract": ["not", "a", "schema"]},
    ],
)
def test_tool_policy_rejects_what_it_cannot_enforce(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PolicyError):
        ToolPolicy(**kwargs)


@pytest.mark.parametrize(
    "limits", [(0, 1, 1, 1), (1, 0, 1, 1), (1, 1, 1, 0), (1, 9, 8, 8), (-1, 1, 1, 1)]
)
def test_stream_policy_rejects_invalid_limits(limits: tuple[int, int, int, int]) -> None:
    with pytest.raises(PolicyError):
        StreamPolicy(*limits)


def test_an_invalid_json_schema_contract_is_refused_at_registration() -> None:
    ledger = Ledger()
    with pytest.raises(PolicyError, match="not a valid JSON schema"):
        ledger.register_external_tool(
            ToolPolicy("j", format="json", contract={"type": "no-such-type"})
        )


def test_a_tool_registers_once() -> None:
    ledger = Ledger()
    ledger.register_external_tool(ToolPolicy("t"))
    with pytest.raises(AlreadyRegistered):
        ledger.register_external_tool(ToolPolicy("t", max_calls=5))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_pending": 0},
        {"max_pending": "8"},
        {"audit_capacity": 0},
        {"audit_capacity": 8193},
        {"retain_outcomes": 0},
    ],
)
def test_ledger_limits_are_checked(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PolicyError):
        Ledger(**kwargs)


# -- start ----------------------------------------------------------------------------------


def test_start_of_an_unknown_tool_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownTool):
        ledger.start("no.such.tool", "x")


@pytest.mark.parametrize(
    ("tool", "value", "why"),
    [
        ("text.echo", b"bytes", "must be a str"),
        ("text.echo", "\ud800", "lone surrogate"),
        ("text.echo", "x" * 16385, "over max_input_bytes 16384"),
        ("json.calc", "text", "object or an array"),
        ("json.calc", 3, "object or an array"),
        ("json.calc", {"a": {1, 2}}, "set is not a JSON value"),
        ("json.calc", {1: "int key"}, "keys must be strings"),
        ("json.calc", {"n": float("nan")}, "finite"),
    ],
)
def test_start_refuses_invalid_input_and_changes_nothing(
    ledger: Ledger, tool: str, value: Any, why: str
) -> None:
    with pytest.raises(InvalidInput, match=why):
        ledger.start(tool, value)
    assert ledger.audit() == ()
    assert ledger.pending_count == 0
    assert ledger.status(ledger.start(tool, "ok" if tool == "text.echo" else {})).call_index == 1


def test_json_depth_is_bounded_at_32_levels(ledger: Ledger) -> None:
    def nest(levels: int) -> Any:
        value: Any = []
        for _ in range(levels - 1):
            value = [value]
        return value

    op = ledger.start("json.calc", nest(32))
    assert ledger.status(op).call_index == 1
    with pytest.raises(InvalidInput, match="deeper than 32"):
        ledger.start("json.calc", nest(33))


def test_the_call_budget_counts_starts_and_a_refusal_spends_nothing(ledger_factory: Any) -> None:
    ledger = ledger_factory()
    ledger.register_external_tool(ToolPolicy("t", max_calls=2, max_input_bytes=4))
    with pytest.raises(InvalidInput):
        ledger.start("t", "too long")
    first = ledger.start("t", "a")
    ledger.cancel(first)
    second = ledger.start("t", "b")
    assert [ledger.status(op).call_index for op in (first, second)] == [1, 2]
    with pytest.raises(CallBudgetExhausted):
        ledger.start("t", "c")


def test_the_pending_bound_covers_queued_and_claimed(ledger_factory: Any) -> None:
    ledger = ledger_factory(max_pending=2)
    ledger.register_external_tool(ToolPolicy("t", max_calls=10))
    ledger.start("t", "queued")
    claimed = ledger.start("t", "claimed")
    ledger.claim(claimed)
    before = kinds(ledger)
    with pytest.raises(PendingLimitReached):
        ledger.start("t", "over")
    assert kinds(ledger) == before
    ledger.complete(claimed, "done")
    ledger.start("t", "fits again")


# -- idempotency keys and entropy ------------------------------------------------------------


def test_keys_are_stable_across_attempts_and_distinct_across_operations(ledger: Ledger) -> None:
    first = ledger.start("text.echo", "a")
    second = ledger.start("text.echo", "a")
    inv = ledger.claim(first)
    keys = {
        inv.idempotency_key,
        ledger.retry(first, RetryClass.TRANSIENT).idempotency_key,
        ledger.retry(first, RetryClass.RATE_LIMITED).idempotency_key,
    }
    assert len(keys) == 1
    other = ledger.claim(second).idempotency_key
    assert other != inv.idempotency_key
    for key in (inv.idempotency_key, other):
        assert KEY_GRAMMAR.fullmatch(key)


def test_keys_are_distinct_across_ledger_instances() -> None:
    keys = set()
    for _ in range(20):
        ledger = Ledger()
        ledger.register_external_tool(ToolPolicy("t"))
        keys.add(ledger.claim(ledger.start("t", "same")).idempotency_key)
    assert len(keys) == 20


def test_a_host_nonce_gives_keys_without_os_entropy(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_entropy(_n: int) -> bytes:
        raise NotImplementedError("no entropy source")

    monkeypatch.setattr(os, "urandom", no_entropy)
    nonce = bytes(range(32))
    keys = []
    for _ in range(2):
        ledger = Ledger(session_nonce=nonce)
        ledger.register_external_tool(ToolPolicy("t"))
        keys.append(ledger.claim(ledger.start("t", "x")).idempotency_key)
    assert keys[0] == keys[1]  # same nonce, same key: the host must keep nonces unique
    other = Ledger(session_nonce=SessionNonce(bytes(16)))
    other.register_external_tool(ToolPolicy("t"))
    assert other.claim(other.start("t", "x")).idempotency_key != keys[0]


def test_external_registration_is_refused_without_entropy(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_entropy(_n: int) -> bytes:
        raise OSError("getrandom: no entropy")

    monkeypatch.setattr(os, "urandom", no_entropy)
    ledger = Ledger()
    with pytest.raises(EntropyUnavailable, match="session_nonce"):
        ledger.register_external_tool(ToolPolicy("t"))
    with pytest.raises(UnknownTool):
        ledger.start("t", "x")


@pytest.mark.parametrize("size", [0, 15, 65])
def test_a_host_nonce_is_bounded(size: int) -> None:
    with pytest.raises(PolicyError):
        SessionNonce(bytes(size))
    with pytest.raises(PolicyError):
        Ledger(session_nonce=bytes(size))


def test_a_nonce_never_shows_its_bytes() -> None:
    secret = b"do-not-print-me-please-0123456789"
    nonce = SessionNonce(secret)
    assert "do-not-print" not in repr(nonce)
    assert "33 bytes" in repr(nonce)
    ledger = Ledger(session_nonce=nonce)
    ledger.register_external_tool(ToolPolicy("t"))
    key = ledger.claim(ledger.start("t", "x")).idempotency_key
    assert secret.hex() not in key and "do-not" not in key
