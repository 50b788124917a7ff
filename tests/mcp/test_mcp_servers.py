"""Real MCP servers as sandboxed workers: `Supervisor(mcp_server=[...])`, each outcome,
and what a hostile server can and cannot do from inside its sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from mcp_fixtures import Servers, sandbox_writable
from proc_helpers import alive

from sandbox import SandboxPolicy
from sandbox.policy import Bind
from supervisor import Supervisor
from supervisor.commands.scripted_bridge import add_sandboxed_tools
from supervisor.ledger import UnknownTool
from supervisor.scripted import ScriptedTool
from supervisor.workers.groups import ToolGroup
from supervisor.workers.supervisor import RELIST_INTERVAL
from supervisor.workers.tool_callbacks import EXIT_FAILED, EXIT_INDETERMINATE, EXIT_TIMED_OUT


def mcp_supervisor(server: list[str], **kwargs: Any) -> Supervisor:
    kwargs.setdefault("ping_interval", None)
    kwargs.setdefault("start_timeout", 30.0)
    return Supervisor(mcp_server=server, **kwargs)


def growing_server(servers: Servers, state: Path, **kwargs: Any) -> Supervisor:
    """The hostile server whose ``grow_tools`` adds a tool, remembered in ``state``."""
    policy = SandboxPolicy(binds=(Bind(str(state), writable=True),))
    return mcp_supervisor([*servers.hostile, "--state", str(state)], policy=policy, **kwargs)


async def test_every_outcome_and_every_attack_of_the_hostile_server(servers: Servers) -> None:
    # a grace a loaded host keeps (an MCP group's 0.25 s was missed at load: the slow
    # call's acknowledged deadline ended indeterminate); the hang is killed all the same
    async with mcp_supervisor(servers.hostile, pool_size=1, cancel_grace=2.0) as sup:
        spec = sup.specs["echo"]
        assert spec.format == "json" and spec.description == "Echo the text back."
        assert spec.schema is not None and spec.schema["required"] == ["text"]

        out = await sup.invoke("echo", {"text": "hi"})
        assert (out.status, out.value) == ("completed", {"result": "hi"})
        out = await sup.invoke("structured", {"n": 3})
        assert out.value == {"n": 3, "square": 9}
        out = await sup.invoke("fail", {"text": "x"})
        assert out.status == "failed" and out.error_code == "tool_error"
        assert out.error == "Error executing tool fail: refused [31mx"  # sanitised

        # the host refuses an input its schema does not allow, before any dispatch
        with pytest.raises(Exception, match="schema"):
            await sup.invoke("echo", {"wrong": 1})

        # a server that answers a cancelled call: timed_out, cancelled, same server
        first = sup.pool.sessions[0].id
        out = await sup.invoke("slow", {"seconds": 30}, deadline=0.5)
        assert out.status == "timed_out", out
        handle = await sup.start("slow", {"seconds": 30})
        await trio.sleep(0.3)
        out = await handle.cancel()
        assert out.status == "cancelled", out
        assert sup.pool.sessions[0].id == first

        # no model behind the sandbox: sampling is refused, clearly
        out = await sup.invoke("sample", {"prompt": "hello"})
        assert out.status == "failed" and "no model" in (out.error or "")

        # host files, network, processes: contained
        for path in ("/etc/shadow", str(Path.home() / ".bash_history"), os.path.abspath(".")):
            out = await sup.invoke("read_host_file", {"path": path})
            assert out.value["result"].startswith("denied"), (path, out.value)
        out = await sup.invoke("open_network", {"host": "127.0.0.1", "port": 22})
        assert out.value["result"].startswith("blocked")
        out = await sup.invoke("fork_bomb", {}, deadline=20)
        assert out.status == "completed" and "stopped after" in out.value["result"]
        forks = int(out.value["result"].split()[2])
        assert forks < (sup.policy.pids or 0)

        # a progress flood: chunks stop at the stream grant, the call completes
        chunks: list[str] = []
        out = await sup.invoke("flood_progress", {"count": 2000}, on_chunk=chunks.append)
        assert out.status == "completed" and 0 < len(chunks) <= 256
        assert chunks[0].startswith('{"progress":1,"total":2000')

        # a hang: killed at the deadline, indeterminate, the server replaced
        out = await sup.invoke("hang", {"seconds": 60}, deadline=0.5)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")
        out = await sup.invoke("echo", {"text": "again"})
        assert out.status == "completed" and out.session_id != first

        # protocol violations: fatal for that server, never for the host
        for tool in ("forge_id", "huge_frame", "exit_now"):  # bad JSON: test_mcp_client
            before = out.session_id
            out = await sup.invoke(tool, {})
            assert out.status == "indeterminate", (tool, out)
            out = await sup.invoke("echo", {"text": tool})
            assert out.status == "completed" and out.session_id != before
        ended = "\n".join(s.stderr.text() for s in sup.pool.history)
        assert "request 987654, which was never made" in ended
        assert "over 4194304" in ended


async def test_each_outcome_as_a_script_sees_it(servers: Servers) -> None:
    # a grace a loaded host keeps: the acknowledged deadline must be seen as timed out
    options: dict[str, Any] = {"pool_size": 1, "tool_prefix": "hostile.", "cancel_grace": 2.0}
    async with mcp_supervisor(servers.hostile, **options) as sup:
        shop = ScriptedTool("shop")
        add_sandboxed_tools(
            shop, sup.tools, lambda tool: sup.tool_callback(tool, deadline=1.0), specs=sup.specs
        )
        result = await shop.execute("hostile.echo --text hi")
        assert (result.exit_code, result.stdout) == (0, '{"result":"hi"}\n'), result.stderr

        # isError: failed, exit 1, the server's text sanitised on stderr
        result = await shop.execute("hostile.fail --text x")
        assert result.exit_code == EXIT_FAILED and result.stdout == ""
        assert result.stderr == "hostile.fail: Error executing tool fail: refused [31mx\n"
        result = await shop.execute("hostile.fail --text x || echo status $?")
        assert result.stdout == "status 1\n"

        # the deadline: the server acknowledges the cancel, timed out, the same server
        first = sup.pool.sessions[0].id
        result = await shop.execute("hostile.slow --seconds 30")
        assert result.exit_code == EXIT_TIMED_OUT, result.stderr
        assert result.stderr == "hostile.slow: timed out (deadline 1 s)\n"
        assert [s.id for s in sup.pool.sessions] == [first]

        # a hang: killed at the deadline, indeterminate, the server replaced
        result = await shop.execute("hostile.hang --seconds 60; echo after $?")
        assert result.stdout == f"after {EXIT_INDETERMINATE}\n", result.stderr
        assert result.stderr == (
            "hostile.hang: outcome unknown (deadline); the effect may or may not have happened\n"
        )
        with trio.fail_after(60):  # a fresh server (its start is not within the 1 s deadline)
            while not [s for s in sup.pool.sessions if s.id != first and s.state == "ready"]:
                await trio.sleep(0.05)
        assert first not in [s.id for s in sup.pool.sessions] and sup.pool.replaced_sessions == 1
        result = await shop.execute("hostile.echo --text again")
        assert (result.exit_code, result.stdout) == (0, '{"result":"again"}\n'), result.stderr


async def test_a_tools_list_changed_refreshes_the_supervisors_tools(
    servers: Servers, tmp_path: Path
) -> None:
    state = sandbox_writable(tmp_path / "state")
    async with growing_server(servers, state, pool_size=1) as sup:
        changed = trio.Event()
        sup.add_tools_callback(changed.set)
        assert "grown" not in sup.specs
        with pytest.raises(UnknownTool):
            await sup.invoke("grown", {"n": 1})
        first = (await sup.invoke("grow_tools", {})).session_id
        with trio.fail_after(60):
            await changed.wait()
        spec = sup.specs["grown"]
        assert spec.description == "Added later: n + 1." and spec.schema is not None
        out = await sup.invoke("grown", {"n": 41})
        assert (out.status, out.value) == ("completed", {"result": 42})
        assert out.session_id != first  # the old session was granted the old tools
        assert not await sup.refresh_tools()  # listed again: nothing new


def running_with(marker: str) -> list[int]:
    """Pids of processes that still run code of their own (`proc_helpers.alive`) and
    whose command line names ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(marker in a for a in proc.info["cmdline"] or []):
                found.append(proc.pid)
    return alive(found)


async def test_a_supervisor_starts_its_server_once(servers: Servers, tmp_path: Path) -> None:
    state = sandbox_writable(tmp_path / "state")
    async with growing_server(servers, state, pool_size=1) as sup:
        out = await sup.invoke("echo", {"text": "x"})  # the describer became this session
        assert (out.status, out.value) == ("completed", {"result": "x"}), out
        assert len(list(state.glob("started-*"))) == 1
        assert len(sup.group("default").pool.sessions) == 1
    assert not running_with(str(state))


def test_a_supervisor_starts_its_server_once_under_asyncio(
    servers: Servers, tmp_path: Path
) -> None:
    """The describer's pipes change hands between two waits on them: asyncio's too."""
    state = sandbox_writable(tmp_path / "state")

    async def run() -> None:
        async with growing_server(servers, state, pool_size=1) as sup:
            out = await sup.invoke("echo", {"text": "x"})
            assert (out.status, out.value) == ("completed", {"result": "x"}), out

    asyncio.run(run())
    assert len(list(state.glob("started-*"))) == 1
    assert not running_with(str(state))


async def test_a_kept_describer_no_session_takes_is_not_left_behind(
    servers: Servers, tmp_path: Path
) -> None:
    state = sandbox_writable(tmp_path / "state")
    async with growing_server(servers, state, pool_size=1, pool_min=0) as sup:
        assert not running_with(str(state))  # no worker kept warm: the describer is gone
        assert (await sup.invoke("echo", {"text": "x"})).status == "completed"
        assert len(list(state.glob("started-*"))) == 2
    fds = fd_table()
    # the start fails after the first group's describer was kept: it goes too
    failing = ToolGroup("failing", mcp_server=[*servers.hostile, "--fail-start"])
    kept = ToolGroup(
        "kept",
        mcp_server=[*servers.hostile, "--state", str(state)],
        policy=SandboxPolicy(binds=(Bind(str(state), writable=True),)),
    )
    with pytest.raises(Exception, match="exited with status 1 before answering initialize"):
        async with Supervisor(groups=[kept, failing], ping_interval=None, start_timeout=30):
            pass
    assert len(list(state.glob("started-*"))) == 3
    assert not running_with(str(state))
    assert fd_table().items() <= fds.items()


def fd_table() -> dict[str, str]:
    table = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own fd, closed meanwhile
            table[name] = os.readlink(f"/proc/self/fd/{name}")
    return table


async def test_a_server_repeating_list_changed_gets_one_listing_per_interval(
    servers: Servers, tmp_path: Path
) -> None:
    state = sandbox_writable(tmp_path / "state")

    def starts() -> int:  # the server leaves a file per start: a listing is one
        return len(list(state.glob("started-*")))

    async with growing_server(servers, state, pool_size=1) as sup:
        assert (await sup.invoke("echo", {"text": "x"})).status == "completed"
        before = starts()
        began = trio.current_time()
        out = await sup.invoke("spam_tools_changed", {"seconds": 2}, deadline=60)
        assert out.status == "completed" and int(out.value["result"].split()[1]) > 100, out
        # one listing at once; what was said meanwhile coalesces into one more, which
        # waits for the interval; nothing after that
        with trio.fail_after(60):
            while starts() < before + 2:
                await trio.sleep(0.1)
        assert trio.current_time() - began >= RELIST_INTERVAL
        await trio.sleep(RELIST_INTERVAL + 1)
        assert starts() == before + 2
        out = await sup.invoke("echo", {"text": "y"})  # the same session serves on
        assert out.status == "completed"


async def test_a_refresh_while_a_session_starts_loses_no_call(
    servers: Servers, tmp_path: Path
) -> None:
    state = sandbox_writable(tmp_path / "state")
    async with growing_server(servers, state, pool_size=1, pool_min=0) as sup:
        (state / "grown").write_text("1")  # the server's tools changed behind its back
        outcomes: list[Any] = []

        async def call(tool: str, value: dict[str, Any]) -> None:
            outcomes.append(await sup.invoke(tool, value))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "echo", {"text": "waiting"})  # starts the first session
            await trio.sleep(0)
            assert await sup.refresh_tools()  # meanwhile: the session may still be starting
        out = await sup.invoke("grown", {"n": 1})  # a session granted the old tools retires
        assert [o.status for o in outcomes] == ["completed"], outcomes
        assert (out.status, out.value) == ("completed", {"result": 2}), out


async def test_a_server_that_cannot_start_says_why_in_one_line(servers: Servers) -> None:
    with pytest.raises(Exception) as failed:
        async with mcp_supervisor([*servers.hostile, "--fail-start"]):
            pass
    message = str(failed.value)
    assert "exited with status 1 before answering initialize" in message
    assert "missing configuration file /etc/hostile.toml" in message
    with pytest.raises(Exception, match="did not answer initialize"):
        async with mcp_supervisor([*servers.hostile, "--silent-start"], start_timeout=4.0):
            pass


async def test_server_everything(servers: Servers) -> None:
    async with mcp_supervisor(servers.everything, tool_prefix="everything.") as sup:
        assert {"everything.echo", "everything.add", "everything.long-running-operation"} <= set(
            sup.tools
        )
        assert sup.specs["everything.long-running-operation"].alias == "longRunningOperation"
        out = await sup.invoke("everything.echo", {"message": "hi"})
        assert out.value == {"text": "Echo: hi"}
        out = await sup.invoke("everything.add", {"a": 2, "b": 3})
        assert out.value == {"text": "The sum of 2 and 3 is 5."}
        chunks: list[str] = []
        out = await sup.invoke(
            "everything.long-running-operation",
            {"duration": 0.3, "steps": 3},
            on_chunk=chunks.append,
        )
        assert out.status == "completed" and len(chunks) == 3
        assert chunks[-1] == '{"progress":3,"total":3}'
        out = await sup.invoke("everything.sample-llm", {"prompt": "hi"})
        assert out.status == "failed" and "no model" in (out.error or "")
        out = await sup.invoke("everything.get-tiny-image", {})
        image = [b for b in out.value["content"] if b["type"] == "image"]
        assert image and image[0]["mimeType"] == "image/png"
        out = await sup.invoke("everything.print-env", {})
        env = out.value["text"]
        assert "HOME" in env and "SANDVISOR" not in env and "/root" not in env

        # a script: the tools are commands with schema-driven flags
        shop = ScriptedTool("shop")
        add_sandboxed_tools(shop, sup.tools, sup.tool_callback, specs=sup.specs)
        result = await shop.execute("everything.add --a 1 --b 2")
        assert result.stdout == "The sum of 1 and 2 is 3.\n", result.stderr
        result = await shop.execute("everything.add --a 1")
        assert result.exit_code == 2 and "schema error" in result.stderr


async def test_server_filesystem_sees_one_bound_directory(servers: Servers, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # the sandbox runs as a uid of its own
    (shared / "note.txt").write_text("hello")
    policy = SandboxPolicy(binds=(Bind(str(shared), writable=True),))
    async with mcp_supervisor([*servers.filesystem, str(shared)], policy=policy) as sup:
        out = await sup.invoke("read_text_file", {"path": str(shared / "note.txt")})
        assert out.status == "completed" and "hello" in str(out.value)
        out = await sup.invoke("write_file", {"path": str(shared / "new.txt"), "content": "x"})
        assert out.status == "completed", out
        assert (shared / "new.txt").read_text() == "x"
        for path in ("/etc/shadow", str(shared / ".." / ".."), str(tmp_path / "outside.txt")):
            out = await sup.invoke("write_file", {"path": path, "content": "pwned"})
            assert out.status == "failed", (path, out)
            out = await sup.invoke("read_text_file", {"path": path})
            assert out.status == "failed", (path, out)
        assert not (tmp_path / "outside.txt").exists()


async def test_mcp_server_time(servers: Servers) -> None:
    async with mcp_supervisor(servers.time) as sup:
        out = await sup.invoke("get_current_time", {"timezone": "Europe/Paris"})
        assert out.status == "completed" and out.value["timezone"] == "Europe/Paris"
        out = await sup.invoke("get_current_time", {"timezone": "Not/AZone"})
        assert out.status == "failed"
