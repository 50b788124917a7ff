"""Invocation tracing (reference-bashkit.md section 3.3 and 1.#15): which events are
recorded with which kind, what is not recorded, and the 256-entry / 1024-byte bounds."""

from __future__ import annotations

from typing import Any

from supervisor.scripted.contract import CommandResult
from supervisor.scripted.tool_commands import command_table
from supervisor.tools import RequestScope, ToolDef, ToolRegistry
from supervisor.tools.context import current_request
from supervisor.tools.trace import (
    MAX_TRACE_ARG_BYTES,
    MAX_TRACE_ENTRIES,
    InvocationTrace,
    truncate_arg,
)

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def traced(*commands: list[str], policy: Any = None) -> list[tuple[str, str, list[str], int]]:
    registry = ToolRegistry(policy=policy)
    registry.register(ToolDef("get", "Get", SCHEMA), lambda p, s: "ok\n")
    registry.register(ToolDef("boom", "Boom"), lambda p, s: 1 / 0)
    table = command_table(registry)
    trace = registry.trace()
    token = current_request.set(RequestScope(None, trace))
    try:
        for argv in commands:
            assert isinstance(table[argv[0]](argv[1:], None), CommandResult)
    finally:
        current_request.reset(token)
    return [(e.name, str(e.kind), e.args, e.exit_code) for e in trace.take()]


def test_recorded_events_and_kinds() -> None:
    assert traced(
        ["help"],
        ["help", "nope"],
        ["discover"],
        ["discover", "--search", "g"],
        ["get", "--help"],
        ["get", "--dry-run", "--id", "1"],
        ["get", "--dry-run", "x"],
        ["get"],
        ["get", "--id", "1"],
        ["boom"],
    ) == [
        ("help", "help", [], 0),
        ("help", "help", ["nope"], 1),
        ("discover", "discover", [], 1),
        ("discover", "discover", ["--search", "g"], 0),
        ("get", "help", ["--help"], 0),
        ("get", "tool", ["--dry-run", "--id", "1"], 0),
        ("get", "tool", ["--dry-run", "x"], 1),
        ("get", "tool", [], 2),
        ("get", "tool", ["--id", "1"], 0),
        ("boom", "tool", [], 1),
    ]


def test_parse_failures_are_not_recorded_but_denials_are() -> None:
    assert traced(["get", "42"], ["get", "--id"]) == [("get", "tool", ["--id"], 2)]
    from supervisor.tools import Deny

    assert traced(["get", "--id", "1"], policy=lambda call: Deny) == [
        ("get", "tool", ["--id", "1"], 1)
    ]


def test_trace_keeps_the_last_256_entries() -> None:
    trace = InvocationTrace()
    for i in range(MAX_TRACE_ENTRIES + 44):
        trace.record("t", "tool", [str(i)], 0)  # type: ignore[arg-type]
    entries = trace.take()
    assert len(entries) == 256
    assert entries[0].args == ["44"] and entries[-1].args == ["299"]
    assert trace.take() == []


def test_args_are_cut_to_1024_bytes_on_a_utf8_boundary() -> None:
    assert truncate_arg("a" * 1024) == "a" * 1024
    assert truncate_arg("a" * 1025) == "a" * 1024
    cut = truncate_arg("a" + "é" * 600)  # 1 + 1200 bytes
    assert cut == "a" + "é" * 511 and len(cut.encode()) == 1023
    cut = truncate_arg("😀" * 300)
    assert cut == "😀" * 256 and len(cut.encode()) == MAX_TRACE_ARG_BYTES
    trace = InvocationTrace()
    trace.record("t", "tool", ["x" * 5000, "short"], 0)  # type: ignore[arg-type]
    (entry,) = trace.take()
    assert entry.args == ["x" * 1024, "short"]
    assert entry.to_dict() == {"name": "t", "kind": "tool", "args": entry.args, "exit_code": 0}
