"""``ScriptedTool`` end to end: the binding-compatible API through the real interpreter,
under trio, under ``asyncio.run``, from threads and from inside a running loop; tool
commands inside scripts; deadlines; traces; and a table of scripts cross-checked with the
bashkit 0.20.1 oracle."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import json
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import trio

from supervisor.scripted import (
    DiscoveryMode,
    ExecutionLimits,
    ScriptedTool,
    ScriptingToolSet,
    ToolDef,
    ToolFailure,
    ToolRegistry,
)
from supervisor.tools import Allow, Deny, ToolCall, current_call

ID = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def echo(params: dict[str, Any], stdin: str | None) -> str:
    return json.dumps({"p": params, "s": stdin}, sort_keys=True) + "\n"


def make(**kwargs: Any) -> ScriptedTool:
    tool = ScriptedTool("t", **kwargs)
    tool.add_tool("get", "Get by id", echo, schema=ID)
    tool.add_tool("raw", "Echo params and stdin", echo)
    tool.add_tool("boom", "Always fails", lambda p, s: 1 / 0)
    tool.add_tool("orders.list", "Dotted", echo)
    tool.add_tool("x-y", "Dashed", echo)
    return tool


def make_oracle() -> Any:
    from bashkit.scripted import ScriptedTool as Oracle

    tool = Oracle("t")
    tool.add_tool("get", "Get by id", echo, schema=ID)
    tool.add_tool("raw", "Echo params and stdin", echo)
    tool.add_tool("boom", "Always fails", lambda p, s=None: 1 / 0)
    tool.add_tool("orders.list", "Dotted", echo)
    tool.add_tool("x-y", "Dashed", echo)
    return tool


SCRIPTS: list[tuple[str, str, str, int]] = [
    ("get --id 1", '{"p": {"id": 1}, "s": null}\n', "", 0),
    ("raw --b 2 --a x", '{"p": {"a": "x", "b": "2"}, "s": null}\n', "", 0),
    ("printf '' | raw", '{"p": {}, "s": ""}\n', "", 0),
    ("raw </dev/null", '{"p": {}, "s": ""}\n', "", 0),
    ("echo hi | raw", '{"p": {}, "s": "hi\\n"}\n', "", 0),
    ("raw <<< 'x y'", '{"p": {}, "s": "x y\\n"}\n', "", 0),
    ("get --id 1 | jq -r .p.id", "1\n", "", 0),
    ("orders.list --n 1; x-y", '{"p": {"n": "1"}, "s": null}\n{"p": {}, "s": null}\n', "", 0),
    ("get 42; echo $?", "2\n", "expected --flag, got: 42", 0),
    ("get; echo $?", "2\n", "get: schema error: required property 'id' is missing\n", 0),
    ("boom || echo failed:$?", "failed:1\n", "boom: callback failed\n", 0),
    (
        "get --id 1 --dry-run",
        '{"dry_run":true,"params":{"id":1},"tool":"get","valid":true}\n',
        "",
        0,
    ),
    ("get --help", "get - Get by id\nUsage: get --id <integer>\n", "", 0),
    ("help get --json | jq -r .name", "get\n", "", 0),
    ("discover --search dot", "orders.list          Dotted\n", "", 0),
    ("type get", "get is a shell builtin\n", "", 0),
    ("help nope; echo $?", "1\n", "help: unknown tool: nope", 0),
    ("for i in 1 2 3; do get --id $i | jq -c .p; done", '{"id":1}\n{"id":2}\n{"id":3}\n', "", 0),
    ('out=$(get --id 7); echo "${out:0:9}"', '{"p": {"i\n', "", 0),
]


@pytest.mark.parametrize(
    ("script", "stdout", "stderr", "code"), SCRIPTS, ids=[s[0] for s in SCRIPTS]
)
def test_scripts(script: str, stdout: str, stderr: str, code: int) -> None:
    result = make().execute_sync(script)
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, stderr, code)


@pytest.mark.parametrize(
    ("script", "stdout", "stderr", "code"), SCRIPTS, ids=[s[0] for s in SCRIPTS]
)
def test_scripts_match_bashkit_oracle(script: str, stdout: str, stderr: str, code: int) -> None:
    result = make_oracle().execute_sync(script)
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, stderr, code)


def test_tool_overrides_a_builtin_of_the_same_name() -> None:
    tool = ScriptedTool("t")
    tool.add_tool("echo", "my echo", lambda p, s: "tool echo\n")
    assert tool.execute_sync("echo --x").stdout == "tool echo\n"
    assert tool.execute_sync("echo hi").stderr == "expected --flag, got: hi"


def test_fresh_interpreter_but_shared_callbacks() -> None:
    count = 0

    def counter(params: dict[str, Any], stdin: str | None) -> str:
        nonlocal count
        count += 1
        return f"{count}\n"

    tool = ScriptedTool("t")
    tool.add_tool("count", "Count", counter)
    tool.env("GREETING", "hello")
    assert tool.execute_sync("x=1; count; echo $GREETING").stdout == "1\nhello\n"
    assert tool.execute_sync('count; echo "x=${x:-unset}"').stdout == "2\nx=unset\n"


def test_empty_script_and_trace_lifecycle() -> None:
    tool = make()
    assert tool.take_last_execution_trace() is None
    result = tool.execute_sync("")
    assert (result.stdout, result.stderr, result.exit_code, result.error) == ("", "", 0, None)
    trace = tool.take_last_execution_trace()
    assert trace is not None and trace.invocations == []
    tool.execute_sync("help; get --id 1; get 42; get; nope; discover --search x")
    trace = tool.take_last_execution_trace()
    assert trace is not None
    assert [(e.name, e.kind, e.args, e.exit_code) for e in trace.invocations] == [
        ("help", "help", [], 0),
        ("get", "tool", ["--id", "1"], 0),
        ("get", "tool", [], 2),
        ("discover", "discover", ["--search", "x"], 0),
    ]
    assert tool.take_last_execution_trace() is None


def test_limits_abort_the_execution() -> None:
    tool = make(max_commands=5)
    result = tool.execute_sync("for i in 1 2 3 4 5 6 7 8; do get --id $i; done")
    assert (result.stdout, result.exit_code) == ("", 1)
    assert result.error == "resource limit exceeded: maximum command count exceeded (5)"
    limited = make(limits=ExecutionLimits(max_stdout_bytes=10))
    out = limited.execute_sync("get --id 1")
    assert (out.stdout, out.stdout_truncated) == ('{"p": {"id', True)


def test_sanitize_errors_off_and_tool_failure_in_scripts() -> None:
    tool = ScriptedTool("t", sanitize_errors=False)
    tool.add_tool("boom", "x", lambda p, s: 1 / 0)

    def deadline(params: dict[str, Any], stdin: str | None) -> str:
        raise ToolFailure("ext: deadline exceeded\n", 124)

    tool.add_tool("ext", "external", deadline)
    result = tool.execute_sync("boom; echo $?; ext; echo $?")
    assert (result.stdout, result.stderr) == (
        "1\n124\n",
        "division by zero" + "ext: deadline exceeded\n",
    )


def test_policy_and_tenant_through_a_shared_registry() -> None:
    seen: list[tuple[str | None, str]] = []

    def policy(call: ToolCall) -> Any:
        seen.append((call.tenant_id, call.surface))
        return Deny if call.tenant_id == "guest" else Allow

    registry = ToolRegistry(policy=policy)
    registry.register(ToolDef("whoami", "Tenant"), lambda p, s: f"{current_call().tenant_id}\n")
    tool = ScriptedTool("t", registry=registry)
    assert tool.execute_sync("whoami", tenant="acme").stdout == "acme\n"
    denied = tool.execute_sync("whoami; echo $?", tenant="guest")
    assert (denied.stdout, denied.stderr) == ("1\n", "whoami: denied by policy\n")
    assert seen == [("acme", "shell"), ("guest", "shell")]
    with pytest.raises(ValueError):
        ScriptedTool("t", registry=registry, sanitize_errors=False)


def slow_tool(timeout: float) -> ScriptedTool:
    async def slow(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(5)
        return "late\n"

    async def trio_slow(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep(5)
        return "late\n"

    tool = ScriptedTool("t", timeout_seconds=timeout)
    tool.add_tool("slow", "asyncio sleep", slow)
    tool.add_tool("trio_slow", "trio sleep", trio_slow)
    return tool


def test_async_callback_timeout_lets_the_script_continue() -> None:
    tool = slow_tool(0.3)
    start = time.monotonic()
    result = tool.execute_sync("echo a; slow; echo b $?")
    assert time.monotonic() - start < 3
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "a\nb 1\n",
        "slow: callback timeout\n",
        0,
        None,
    )


def test_sync_callback_overrun_aborts_the_execution() -> None:
    tool = ScriptedTool("t", timeout_seconds=0.2)
    tool.add_tool("sslow", "blocks", lambda p, s: time.sleep(0.4) or "done\n")
    result = tool.execute_sync("echo a; sslow; echo b")
    assert (result.stdout, result.exit_code) == ("", 1)
    assert result.error == "resource limit exceeded: execution timeout (200ms)"


def test_request_timeout_ms_aborts_with_124() -> None:
    tool = slow_tool(30)
    result = tool.execute_request_sync({"commands": "echo a; slow; echo b", "timeout_ms": 50})
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "",
        "sandvisor: execution timed out after 0.1s\n",
        124,
        "timeout",
    )
    with pytest.raises(ValueError):
        tool.execute_request_sync({"commands": 5})
    with pytest.raises(ValueError):
        tool.execute_request_sync({"commands": "x", "timeout_ms": -1})


async def test_execute_under_trio_with_trio_callbacks() -> None:
    tool = slow_tool(0.3)

    async def quick(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep(0.01)
        return f"{params['n']}\n"

    tool.add_tool("quick", "trio", quick)
    result = await tool.execute("quick --n 1; trio_slow; echo $?")
    assert (result.stdout, result.stderr) == ("1\n1\n", "trio_slow: callback timeout\n")


async def test_concurrent_executions_keep_their_own_tenant_and_trace() -> None:
    async def who(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep(0.02)
        return f"{current_call().tenant_id}\n"

    tool = ScriptedTool("t")
    tool.add_tool("who", "tenant", who)
    results: dict[str, str] = {}

    async def run(tenant: str) -> None:
        results[tenant] = (await tool.execute("who; who", tenant=tenant)).stdout

    async with trio.open_nursery() as nursery:
        for tenant in ("a", "b", "c"):
            nursery.start_soon(run, tenant)
    assert results == {"a": "a\na\n", "b": "b\nb\n", "c": "c\nc\n"}


def test_execute_under_asyncio_run() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def cb(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(0.01)
        return f"{var.get()}:{asyncio.get_running_loop() is loop}\n"

    tool = ScriptedTool("t")
    tool.add_tool("cb", "asyncio", cb)
    loop: Any = None

    async def main() -> str:
        nonlocal loop
        loop = asyncio.get_running_loop()
        var.set("caller")
        return (await tool.execute("cb")).stdout

    assert asyncio.run(main()) == "caller:True\n"


def test_execute_sync_from_a_thread_pool_and_inside_a_running_loop() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def cb(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(0.005)
        return f"{params['n']}:{var.get()}:{threading.current_thread().name != 'MainThread'}\n"

    tool = ScriptedTool("t")
    tool.add_tool("cb", "asyncio", cb)

    def in_thread(n: int) -> str:
        var.set(f"t{n}")
        return tool.execute_sync(f"cb --n {n}").stdout

    with ThreadPoolExecutor(4) as pool:
        outputs = list(pool.map(in_thread, range(8)))
    assert outputs == [f"{n}:t{n}:True\n" for n in range(8)]

    async def inside_loop() -> str:
        var.set("loop")
        return tool.execute_sync("cb --n 9").stdout  # blocks this loop, must not deadlock

    assert asyncio.run(inside_loop()) == "9:loop:True\n"
    var.set("main")
    assert tool.execute_sync("cb --n 1").stdout == "1:main:False\n"


def test_execute_sync_with_the_trio_backend() -> None:
    tool = slow_tool(0.2)
    result = tool.execute_sync("trio_slow; echo $?", backend="trio")
    assert (result.stdout, result.stderr) == ("1\n", "trio_slow: callback timeout\n")


def test_toolset_tools_execute() -> None:
    toolset = ScriptingToolSet("api", mode=DiscoveryMode.WITH_DISCOVERY)
    toolset.add_tool(ToolDef("greet", "Greet someone").with_category("social"), echo)
    script, disc = toolset.tools()
    assert script.execute_sync({"commands": "greet --name A"}).stdout == (
        '{"p": {"name": "A"}, "s": null}\n'
    )
    found = disc.execute_sync({"all": True})
    assert (found.stdout, found.exit_code) == ("social (1 tool)\n", 0)
    assert disc.execute_sync({"query": "greet"}).stdout == "greet                Greet someone\n"
    assert disc.execute_sync({"commands": "help greet"}).stdout == "greet - Greet someone\n"
    trace = toolset.take_last_execution_trace()
    assert trace is not None and trace.invocations[0].kind == "help"


def test_private_loops_close_with_their_threads() -> None:
    """execute_sync reuses one event loop per thread; it must not outlive the thread."""

    async def cb(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(0)
        return "x"

    tool = ScriptedTool("t")
    tool.add_tool("cb", "asyncio", cb)
    tool.execute_sync("cb")  # this thread's loop exists before counting
    before = len(os.listdir("/proc/self/fd"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        threads = [threading.Thread(target=tool.execute_sync, args=("cb",)) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_execute_sync_from_an_executor_of_a_running_loop() -> None:
    """The loop runs in the main thread; execute_sync runs in its executor's threads."""

    async def cb(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(0.005)
        return f"{params['n']}\n"

    tool = ScriptedTool("t")
    tool.add_tool("cb", "asyncio", cb)

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        calls = [loop.run_in_executor(None, tool.execute_sync, f"cb --n {n}") for n in range(4)]
        return [result.stdout for result in await asyncio.gather(*calls)]

    assert asyncio.run(main()) == ["0\n", "1\n", "2\n", "3\n"]
