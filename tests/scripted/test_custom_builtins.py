"""``ScriptedTool.builtin``: raw-argv builtins (bashkit's ``.builtin``): the words
unparsed, stdin, a str or ``BuiltinResult``, sync or async, failures sanitised like a
tool callback's, and never in the way of a tool, ``help`` or ``discover``."""

from __future__ import annotations

import asyncio

import pytest

from supervisor.scripted import BuiltinContext, BuiltinResult, ScriptedTool, ToolFailure
from supervisor.tools import ToolDef, ToolRegistry


def echo_ctx(ctx: BuiltinContext) -> str:
    return f"{ctx.name} {ctx.argv} {ctx.stdin!r}\n"


def test_the_words_arrive_unparsed_with_stdin() -> None:
    tool = ScriptedTool("t")
    tool.builtin("raw", echo_ctx)
    result = tool.execute_sync("raw -x --y=1 -- 'a b'; echo in | raw; raw </dev/null")
    assert result.stdout == ("raw ['-x', '--y=1', '--', 'a b'] None\nraw [] 'in\\n'\nraw [] ''\n")


def test_results_async_and_failures() -> None:
    async def later(ctx: BuiltinContext) -> BuiltinResult:
        await asyncio.sleep(0)
        return BuiltinResult("out\n", "err\n", 3)

    def boom(ctx: BuiltinContext) -> str:
        raise RuntimeError("db://secret")

    def chosen(ctx: BuiltinContext) -> str:
        raise ToolFailure("chosen: nope\n", 4)

    tool = ScriptedTool("t")
    tool.builtin("later", later)
    tool.builtin("boom", boom)
    tool.builtin("chosen", chosen)
    tool.builtin("odd", lambda ctx: 7)  # type: ignore[arg-type, return-value]
    result = tool.execute_sync("later; echo $?; boom; echo $?; chosen; echo $?; odd; echo $?")
    assert result.stdout == "out\n3\n1\n4\n1\n"
    assert result.stderr == "err\nboom: callback failed\nchosen: nope\nodd: callback failed\n"
    open_tool = ScriptedTool("t", sanitize_errors=False)
    open_tool.builtin("boom", boom)
    assert open_tool.execute_sync("boom").stderr == "db://secret"


def test_a_builtin_overrides_a_shell_builtin_and_not_a_tool() -> None:
    tool = ScriptedTool("t")
    tool.builtin("echo", lambda ctx: "custom echo\n")
    tool.add_tool("get", "Get", lambda p, s: "tool\n")
    assert tool.execute_sync("echo hi; get; type echo").stdout == (
        "custom echo\ntool\necho is a shell builtin\n"
    )
    with pytest.raises(ValueError, match="already registered"):
        tool.builtin("get", echo_ctx)
    with pytest.raises(ValueError, match="already registered as a builtin"):
        tool.add_tool("echo", "Echo", lambda p, s: "")
    for bad in ("help", "discover", "local", "a b", "x/y"):
        with pytest.raises(ValueError):
            tool.builtin(bad, echo_ctx)
    with pytest.raises(TypeError):
        tool.builtin("n", "not callable")  # type: ignore[arg-type]


def test_a_tool_of_a_shared_registry_wins_over_a_builtin_of_its_name() -> None:
    registry = ToolRegistry()
    tool = ScriptedTool("t", registry=registry)
    tool.builtin("get", lambda ctx: "builtin\n")
    registry.register(ToolDef("get", "Get"), lambda p, s: "tool\n")
    assert tool.execute_sync("get").stdout == "tool\n"
