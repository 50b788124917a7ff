"""The bridge's MCP client core, sans I/O: the handshake, names, results, and every line
from the server judged (what is fatal, what is answered, what is a chunk)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worker_runtime.bridges.mcp_client import (
    MAX_MESSAGE_BYTES,
    CallEnded,
    Initialized,
    Log,
    McpClient,
    McpViolation,
    Progress,
    ToolEntry,
    ToolsChanged,
    ToolsListed,
    name_tools,
    tool_id,
)

NEEDS_SANDBOX = False


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def sent(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in data.splitlines()]


def ready_client(tools: list[dict[str, Any]] | None = None) -> McpClient:
    client = McpClient()
    request = sent(client.start())[0]
    assert request["method"] == "initialize" and request["params"]["capabilities"] == {}
    result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
              "serverInfo": {"name": "s", "version": "1"}}  # fmt: skip
    events, answer = client.receive(line({"jsonrpc": "2.0", "id": 1, "result": result}))
    assert events == [Initialized("2025-06-18", "s 1")]
    notice, listing = sent(answer)
    assert notice["method"] == "notifications/initialized" and listing["method"] == "tools/list"
    tools = tools or [{"name": "echo", "inputSchema": {"type": "object"}}]
    events, _ = client.receive(
        line({"jsonrpc": "2.0", "id": listing["id"], "result": {"tools": tools}})
    )
    assert isinstance(events[0], ToolsListed) and client.ready
    return client


def test_tools_are_listed_over_every_page() -> None:
    client = McpClient()
    client.start()
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}
    client.receive(line({"jsonrpc": "2.0", "id": 1, "result": result}))
    page1 = {"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "c"}
    events, more = client.receive(line({"jsonrpc": "2.0", "id": 2, "result": page1}))
    assert events == [] and sent(more)[0]["params"] == {"cursor": "c"}
    page2 = {"tools": [{"name": "getTinyImage", "inputSchema": {}, "description": "i\x1b"}]}
    (listed,), _ = client.receive(line({"jsonrpc": "2.0", "id": 3, "result": page2}))
    assert isinstance(listed, ToolsListed)
    assert [(t.id, t.name, t.description) for t in listed.tools] == [
        ("a", "a", ""), ("get-tiny-image", "getTinyImage", "i")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [("longRunningOperation", "long-running-operation"), ("get_current_time",
     "get_current_time"), ("sampleLLM", "sample-llm"), ("a b/c", "a-b-c"), ("!!", "tool")],
)  # fmt: skip
def test_names_become_ids(name: str, expected: str) -> None:
    assert tool_id(name) == expected


def test_clashing_names_get_suffixes_and_a_repeat_is_refused() -> None:
    tools = name_tools([ToolEntry("a-b", {}), ToolEntry("aB", {})], prefix="x.")
    assert [t.id for t in tools] == ["x.a-b", "x.a-b-2"]
    with pytest.raises(McpViolation, match="twice"):
        name_tools([ToolEntry("a", {}), ToolEntry("a", {})])


def test_a_call_its_progress_and_its_results() -> None:
    client = ready_client()
    request = sent(client.call("r1", "echo", {"x": 1}))[0]
    assert request["params"] == {"name": "echo", "arguments": {"x": 1},
                                 "_meta": {"progressToken": "r1"}}  # fmt: skip
    progress = {"progressToken": "r1", "progress": 1, "total": 2, "message": "m"}
    events, _ = client.receive(line({"jsonrpc": "2.0", "method": "notifications/progress",
                                     "params": progress}))  # fmt: skip
    assert events == [Progress("r1", '{"progress":1,"total":2,"message":"m"}')]
    text = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    events, _ = client.receive(line({"jsonrpc": "2.0", "id": request["id"], "result": text}))
    assert events == [CallEnded("r1", "result", {"text": "a\nb"})]
    # progress after the end, or for a token never given: nothing
    events, _ = client.receive(line({"jsonrpc": "2.0", "method": "notifications/progress",
                                     "params": progress}))  # fmt: skip
    assert events == []


@pytest.mark.parametrize(
    ("result", "end"),
    [
        ({"content": [], "structuredContent": {"a": 1}}, CallEnded("r1", "result", {"a": 1})),
        (
            {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
            CallEnded("r1", "result",
                      {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
        ),
        (
            {"content": [{"type": "text", "text": "bad\x1b[0m\x00"}], "isError": True},
            CallEnded("r1", "tool_error", message="bad[0m"),
        ),
    ],
)  # fmt: skip
def test_result_shapes(result: dict[str, Any], end: CallEnded) -> None:
    client = ready_client()
    request_id = sent(client.call("r1", "echo", {}))[0]["id"]
    events, _ = client.receive(line({"jsonrpc": "2.0", "id": request_id, "result": result}))
    assert events == [end]


def test_an_error_answer_and_a_cancel() -> None:
    client = ready_client()
    request_id = sent(client.call("r1", "echo", {}))[0]["id"]
    cancel = sent(client.cancel("r1", "deadline"))[0]
    assert cancel == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": request_id, "reason": "deadline"}}  # fmt: skip
    error = {"code": -32800, "message": "cancelled"}
    events, _ = client.receive(line({"jsonrpc": "2.0", "id": request_id, "error": error}))
    assert events == [CallEnded("r1", "rpc_error", message="cancelled", code=-32800)]
    assert client.cancel("r1", "late") == b""


def test_requests_from_the_server_ping_answered_the_rest_refused() -> None:
    client = ready_client()
    _, answer = client.receive(line({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
    assert sent(answer) == [{"jsonrpc": "2.0", "id": "p", "result": {}}]
    for method in ("sampling/createMessage", "elicitation/create", "roots/list"):
        _, answer = client.receive(line({"jsonrpc": "2.0", "id": 7, "method": method}))
        (reply,) = sent(answer)
        assert reply["error"]["code"] == -32601 and "no model" in reply["error"]["message"]


def test_notifications_that_matter() -> None:
    client = ready_client()
    changed = line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert client.receive(changed)[0] == [ToolsChanged()]
    log = line({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "x\x1b"}})  # fmt: skip
    assert client.receive(log)[0] == [Log("info: x")]


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1, 2]",  # a batch
        b'{"id": 1, "result": {}}',  # no jsonrpc
        b'{"jsonrpc": "2.0", "id": 99, "result": {}}',  # never asked
        b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}',
        b'{"jsonrpc": "2.0", "id": 3, "result": {"content": "not a list"}}',
        b'{"jsonrpc": "2.0", "method": "x", "result": {}}',
        b"x" * (MAX_MESSAGE_BYTES + 1),
    ],
)
def test_violations_are_fatal(data: bytes) -> None:
    client = ready_client()
    client.call("r1", "echo", {})  # request id 3
    with pytest.raises(McpViolation):
        client.receive(data)


def test_a_duplicate_answer_is_fatal() -> None:
    client = ready_client()
    request_id = sent(client.call("r1", "echo", {}))[0]["id"]
    answer = line({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})
    client.receive(answer)
    with pytest.raises(McpViolation, match="never made"):
        client.receive(answer)


@pytest.mark.parametrize(
    "result",
    [
        {"protocolVersion": "1999-01-01", "capabilities": {"tools": {}}},
        {"protocolVersion": "2025-06-18", "capabilities": {}},
    ],
)
def test_an_unusable_initialize_is_refused(result: dict[str, Any]) -> None:
    client = McpClient()
    client.start()
    with pytest.raises(McpViolation):
        client.receive(line({"jsonrpc": "2.0", "id": 1, "result": result}))
