"""Fixtures for the ledger tests: a controllable clock and ledgers in both modes.

``ledger_factory`` builds in-memory or durable ledgers (the ``mode`` parameter). For a
durable one, teardown reopens the journal and checks that replaying it gives back exactly
the state the test left, so every transition a test makes is also a recovery test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ledger_helpers import FakeClock, snapshot

from supervisor.ledger import Ledger, OperationState, StreamPolicy, ToolPolicy

LedgerFactory = Callable[..., Ledger]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "durable"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger_factory(mode: str, tmp_path: Path, clock: FakeClock) -> Iterator[LedgerFactory]:
    made: list[tuple[Ledger, Path | None]] = []

    def make(**kwargs: Any) -> Ledger:
        path = tmp_path / f"journal-{len(made)}.sqlite3" if mode == "durable" else None
        kwargs.setdefault("clock", clock.monotonic)
        kwargs.setdefault("wall_clock", clock.wall)
        ledger = Ledger(path=path, **kwargs)
        made.append((ledger, path))
        return ledger

    yield make
    for ledger, path in made:
        if path is None or ledger._unusable is not None:
            continue
        before = snapshot(ledger)
        ledger.verify_audit_chain()
        ledger.close()
        with Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall) as reopened:
            assert snapshot(reopened) == before
            for info in reopened.pending():
                if info.state != OperationState.QUEUED:
                    assert info.indeterminate
            reopened.verify_audit_chain()


@pytest.fixture
def ledger(ledger_factory: LedgerFactory) -> Ledger:
    """A ledger with three tools: ``text.echo`` (3 attempts, 10 s deadline, streaming),
    ``json.calc`` (json with a contract) and ``text.once`` (defaults)."""
    led = ledger_factory()
    led.register_external_tool(
        ToolPolicy("text.echo", max_calls=100, max_attempts=3, deadline=10.0, stream=StreamPolicy())
    )
    led.register_external_tool(
        ToolPolicy(
            "json.calc",
            format="json",
            max_calls=100,
            max_output_bytes=64,
            contract={
                "type": "object",
                "required": ["sum"],
                "properties": {"sum": {"type": "integer"}},
            },
        )
    )
    led.register_external_tool(ToolPolicy("text.once"))
    return led
