"""`sandvisor mcp` through the official SDK's own client over a real stdio pipe: the tool
list, the script and discover tools, sandboxed tools with progress notifications, MCP
cancellation as a cooperative cancel (seen in the audit log), errors, and the end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from hosting_helpers import child_env, descendants, read_audit
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from supervisor.scripted import prompts


@asynccontextmanager
async def mcp_session(*options: str, errlog: Any = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "mcp", "--example", *options],
        env=child_env(),
    )
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    """The text of a tool result (one TextContent)."""
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def audit_until(path: Path, count: int) -> list[dict[str, Any]]:
    with trio.fail_after(15):
        while len(events := read_audit(path)) < count:
            await trio.sleep(0.05)
    return events


async def test_tools_scripts_discovery_and_progress(tmp_path: Path) -> None:
    before = {p.pid for p in descendants()}
    async with mcp_session() as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert sorted(listed) == ["archive.export", "feed.fetch", "report.render", "shop",
                                  "shop_discover", "stock.check"]  # fmt: skip
        assert listed["shop"].input_schema == prompts.request_schema()
        assert listed["shop"].output_schema == prompts.response_schema()
        assert listed["shop_discover"].input_schema == prompts.discover_tool_schema()
        assert "list_products" in (listed["shop"].description or "")
        assert listed["report.render"].input_schema["required"] == ["input"]

        script = (
            "for id in $(list_products | jq -r '.[].id'); do "
            "get_product --id $id | jq -c '{name, stock, price}'; done | report.render"
        )
        result = await session.call_tool("shop", {"commands": script})
        assert not result.is_error
        assert result.structured_content["exit_code"] == 0
        assert "total" in text_of(result) and "anvil" in text_of(result)

        result = await session.call_tool("shop", {"commands": "get_product --id 99"})
        assert result.is_error and result.structured_content["exit_code"] == 1
        assert "no product 99" in text_of(result)

        result = await session.call_tool("shop_discover", {"all": True})
        assert "catalogue" in text_of(result) and "sandboxed" in text_of(result)
        result = await session.call_tool("shop_discover", {"commands": "discover; ls"})
        assert result.is_error

        result = await session.call_tool("stock.check", {"sku": "rope"})
        assert json.loads(text_of(result)) == {"checked": {"sku": "rope"}, "ok": True}
        assert result.structured_content["status"] == "completed"
        result = await session.call_tool("report.render", {"text": "wrong field"})
        assert result.is_error and "input" in text_of(result)
        with pytest.raises(MCPError, match="unknown tool"):
            await session.call_tool("no.such.tool", {})

        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        result = await session.call_tool(
            "archive.export", {"input": "4"}, progress_callback=on_progress
        )
        assert text_of(result) == "exported 4 batches"
        assert seen == [(float(i), f"exported batch {i}/4") for i in range(1, 5)]
        assert result.structured_content["chunks"] == 4
    with trio.fail_after(10):
        while {p.pid for p in descendants()} - before:
            await trio.sleep(0.05)


async def test_mcp_cancellation_is_a_cooperative_cancel(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with mcp_session("--audit-log", str(audit)) as session:
        first = trio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first.set()

        async with trio.open_nursery() as nursery:

            async def call() -> None:
                await session.call_tool(
                    "archive.export", {"input": "1000"}, progress_callback=on_progress
                )

            nursery.start_soon(call)
            with trio.fail_after(15):
                await first.wait()
            nursery.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        (event,) = await audit_until(audit, 1)
        assert (event["tool"], event["status"], event["kill_reason"]) == (
            "archive.export",
            "cancelled",
            None,
        )
        # the server lives on and its worker acknowledged: the next call just works
        result = await session.call_tool("stock.check", {"n": 1})
        assert not result.is_error


async def test_a_missed_deadline_is_an_error_result_with_its_outcome() -> None:
    async with mcp_session("--deadline", "0.5", "--cancel-grace", "0.2") as session:
        result = await session.call_tool("feed.fetch", {"input": "30"})
        assert result.is_error
        assert result.structured_content["status"] == "indeterminate"
        assert result.structured_content["kill_reason"] == "deadline"
        assert "outcome unknown" in text_of(result)
        result = await session.call_tool("shop", {"commands": "echo 30 | feed.fetch; echo $?"})
        assert result.structured_content["stdout"] == "125\n"  # the exit status in the script
        assert "outcome unknown" in result.structured_content["stderr"]


def test_sigterm_stops_an_idle_server_in_order() -> None:
    """A client that neither writes nor closes stdin: SIGTERM still ends the server at once
    (no thread stuck reading stdin), its workers with it, exit 0."""
    server = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "mcp", "--example"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env(),
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip
        server.stdin.write(json.dumps(initialize).encode() + b"\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline())
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "sandvisor"
        workers = psutil.Process(server.pid).children(recursive=True)
        assert workers
        server.send_signal(signal.SIGTERM)
        assert server.wait(10) == 0
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_malformed_lines_get_json_rpc_errors_and_the_server_goes_on() -> None:
    """A lone surrogate, deep nesting, wrong types: each gets JSON-RPC's error answer with
    the id where it can be read (the SDK alone would answer nothing); the server goes on."""
    server = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "mcp", "--example"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env(),
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None

    def send(message: bytes) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(message + b"\n")
        server.stdin.flush()
        reply: dict[str, Any] = json.loads(server.stdout.readline())
        return reply

    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}  # fmt: skip
        assert send(json.dumps(initialize).encode())["id"] == 1
        server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        call = (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": '
                b'"shop", "arguments": {"commands": "echo \\ud800"}}}')  # fmt: skip
        reply = send(call)
        assert reply["id"] == 7 and reply["error"]["code"] == -32700, reply
        deep = b'{"jsonrpc": "2.0", "id": "d", "method": "ping", "params": ' + b"[" * 100_000
        reply = send(deep + b"]" * 100_000 + b"}")
        assert reply["id"] == "d" and reply["error"]["code"] in (-32700, -32600), reply
        reply = send(b'{"jsonrpc": "2.0", "id": [1], "method": 5}')
        assert reply["id"] is None and reply["error"]["code"] == -32600, reply
        reply = send(b"not json")
        assert reply["id"] is None and reply["error"]["code"] == -32700, reply
        assert send(b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}') == {
            "jsonrpc": "2.0", "id": 8, "result": {}}  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "shop", "arguments": {"commands": "echo fine"}}}  # fmt: skip
        reply = send(json.dumps(call).encode())
        assert reply["id"] == 9 and "fine" in json.dumps(reply["result"]), reply
    finally:
        server.stdin.close()
        assert server.wait(10) == 0
