"""`sandvisor mcp --server -- COMMAND`, driven by the official SDK's own client over a real
stdio pipe: the server's own tools and names, each outcome, progress, the client's
cancellation, and a hang that costs the server its sandbox but not the wrapper."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hosting_helpers import child_env, read_audit
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent, ToolListChangedNotification
from mcp_fixtures import Servers, sandbox_writable


@asynccontextmanager
async def wrapped(
    server: list[str], *options: str, message_handler: Any = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "supervisor", "mcp", "--server", *options, "--", *server],
        env=child_env(),
    )
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write, message_handler=message_handler) as session,
    ):
        with trio.fail_after(60):
            await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def audit_until(path: Path, count: int) -> list[dict[str, Any]]:
    with trio.fail_after(20):
        while len(events := read_audit(path)) < count:
            await trio.sleep(0.05)
    return events


async def test_each_outcome_through_the_wrapper(servers: Servers, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    options = ("--deadline", "1", "--pool-size", "1", "--audit-log", str(audit))
    async with wrapped(servers.hostile, *options) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert {"echo", "slow", "hang", "flood_progress"} <= set(listed)
        assert listed["echo"].description == "Echo the text back."
        assert listed["echo"].input_schema["required"] == ["text"]

        result = await session.call_tool("echo", {"text": "hi"})
        assert not result.is_error and result.structured_content == {"result": "hi"}
        result = await session.call_tool("echo", {"nope": 1})  # refused by the schema
        assert result.is_error and "schema" in text_of(result)
        result = await session.call_tool("fail", {"text": "x"})
        assert result.is_error and "\x1b" not in text_of(result)
        result = await session.call_tool("slow", {"seconds": 30})
        assert result.is_error and "timed out" in text_of(result)

        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        result = await session.call_tool(
            "flood_progress", {"count": 50}, progress_callback=on_progress
        )
        assert not result.is_error and len(seen) == 50
        assert seen[0] == (1.0, "step 1 " + "x" * 100)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "slow", {"seconds": 0.9})
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()  # the SDK sends notifications/cancelled

        result = await session.call_tool("hang", {"seconds": 60})
        assert result.is_error and "outcome unknown" in text_of(result)
        with trio.fail_after(60):  # a fresh server (its start is not within --deadline 1)
            while (result := await session.call_tool("echo", {"text": "after"})).is_error:
                # the fresh server's first call may miss --deadline 1: acknowledged in
                # its grace (timed out), or not on a loaded host (outcome unknown)
                assert "timed out" in text_of(result) or "outcome unknown" in text_of(result)
                await trio.sleep(0.5)

    statuses = [(e["tool"], e["status"]) for e in await audit_until(audit, 7)]
    assert statuses[-1] == ("echo", "completed")
    assert ("slow", "timed_out") in statuses and ("slow", "cancelled") in statuses
    assert ("hang", "indeterminate") in statuses and ("fail", "failed") in statuses


async def test_server_everything_through_the_wrapper(servers: Servers) -> None:
    async with wrapped(servers.everything) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"echo", "add", "longRunningOperation"} <= names
        result = await session.call_tool("echo", {"message": "hi"})
        assert text_of(result) == "Echo: hi"
        steps: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        result = await session.call_tool(
            "longRunningOperation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
        assert not result.is_error and steps == [1.0, 2.0, 3.0]
        result = await session.call_tool("getTinyImage", {})
        assert [c.type for c in result.content] == ["text", "image", "text"]


async def test_the_servers_tools_list_changed_reaches_the_client(
    servers: Servers, tmp_path: Path
) -> None:
    state = sandbox_writable(tmp_path / "state")
    changed = trio.Event()

    async def on_message(message: Any) -> None:  # the SDK client's own hook
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    server = [*servers.hostile, "--state", str(state)]
    options = ("--bind", str(state), "--pool-size", "1")
    async with wrapped(server, *options, message_handler=on_message) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "grow_tools" in names and "grown" not in names
        with pytest.raises(MCPError, match="unknown tool 'grown'"):
            await session.call_tool("grown", {"n": 1})

        result = await session.call_tool("grow_tools", {})
        assert result.structured_content == {"result": "grown"}
        with trio.fail_after(60):  # the supervisor lists the tools again in a fresh sandbox
            await changed.wait()
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert listed["grown"].description == "Added later: n + 1."
        assert listed["grown"].input_schema["required"] == ["n"]
        result = await session.call_tool("grown", {"n": 41})  # on a session granted it
        assert not result.is_error and result.structured_content == {"result": 42}
        result = await session.call_tool("echo", {"text": "still"})
        assert result.structured_content == {"result": "still"}
