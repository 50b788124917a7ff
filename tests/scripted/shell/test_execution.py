"""run_script as a whole: resolution order, the command-table contract, fresh state,
parse errors before anything runs, trio and asyncio, never raising for a script."""

from __future__ import annotations

import asyncio

import anyio
import pytest
import trio
from language_support import Recorder, run

from supervisor.scripted.contract import Command, CommandResult, ScriptRequest
from supervisor.scripted.shell.execution import run_script


async def test_resolution_order_function_override_builtin_table() -> None:
    def echo_tool(args: list[str], stdin: str | None) -> CommandResult:
        return CommandResult(stdout="tool-echo " + " ".join(args) + "\n")

    table: dict[str, Command] = {"echo": echo_tool, "greet": Recorder()}
    # without the override, the shell builtin wins over the table entry
    result = await run("echo a", table)
    assert result.stdout == "a\n"
    # listed in overrides: the tool replaces the builtin
    result = await run("echo a", table, overrides=frozenset({"echo"}))
    assert result.stdout == "tool-echo a\n"
    # a function still comes first
    result = await run("echo() { builtin echo fn; }; echo a", table, overrides=frozenset({"echo"}))
    assert result.stdout == "fn\n"


async def test_table_command_sees_args_and_stdin() -> None:
    tool = Recorder()
    result = await run(
        "tool a 'b c'; echo piped | tool x; tool <<< here; printf '' | tool; tool < /dev/null",
        {"tool": tool},
    )
    assert tool.calls == [
        (["a", "b c"], None),
        (["x"], "piped\n"),
        ([], "here\n"),
        ([], ""),
        ([], ""),
    ]
    assert result.stdout == "piped\nhere\n"


async def test_table_command_output_is_verbatim_and_status_kept() -> None:
    def tool(args: list[str], stdin: str | None) -> CommandResult:
        return CommandResult(stdout="no newline", stderr="warn", exit_code=3)

    result = await run('tool; echo " rc=$?"', {"tool": tool})
    assert result.stdout == "no newline rc=3\n"
    assert result.stderr == "warn"


async def test_async_table_command_is_awaited() -> None:
    async def tool(args: list[str], stdin: str | None) -> CommandResult:
        await anyio.sleep(0.01)
        return CommandResult(stdout=f"async {args[0]}\n")

    result = await run('x=$(tool 1); echo "$x"; tool 2 | { read l; echo "[$l]"; }', {"tool": tool})
    assert result.stdout == "async 1\n[async 2]\n"


async def test_a_failing_table_command_does_not_take_the_shell_down() -> None:
    def boom(args: list[str], stdin: str | None) -> CommandResult:
        raise RuntimeError("secret detail")

    def wrong(args: list[str], stdin: str | None) -> CommandResult:
        return "not a result"  # type: ignore[return-value]

    result = await run("boom; echo $?; wrong; echo $?", {"boom": boom, "wrong": wrong})
    assert result.stdout == "1\n1\n"
    assert "secret detail" not in result.stderr
    assert result.error is None


async def test_while_read_loop_shares_stdin_with_commands_like_bash() -> None:
    tool = Recorder()
    result = await run(
        "printf 'a\\nb\\nc\\n' | while read l; do echo \"got $l\"; tool; done", {"tool": tool}
    )
    assert result.stdout == "got a\nb\nc\n"
    assert tool.calls == [([], "b\nc\n")]


async def test_each_run_starts_from_fresh_state() -> None:
    first = await run("x=1; f() { echo f; }; export E=1; set -e")
    assert first.exit_code == 0
    second = await run('echo "[${x-}]"; f; printenv E; echo $?; false; echo still')
    assert second.stdout == "[]\n1\nstill\n"


async def test_parse_error_is_reported_before_anything_runs() -> None:
    tool = Recorder()
    result = await run("tool first\nif then fi\n", {"tool": tool})
    assert tool.calls == []
    message = "parse error at line 2, column 4: syntax error near unexpected token `then'"
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "",
        message,
        1,
        message,
    )


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "if true; then echo",
            "parse error at line 2, column 1: syntax error: unexpected end of file",
        ),
        ("echo )", "parse error at line 1, column 6: syntax error near unexpected token `)'"),
        ("fi", "parse error at line 1, column 1: syntax error near unexpected token `fi'"),
        ("a && || b", "parse error at line 1, column 6: syntax error near unexpected token `||'"),
        (
            'echo "abc',
            "parse error at line 1, column 6: unexpected EOF while looking for matching `\"'",
        ),
    ],
)
async def test_parse_error_messages_match_the_peer(script: str, message: str) -> None:
    result = await run(script)
    assert result.error == message


async def test_empty_script() -> None:
    result = await run("   \n  ")
    assert (result.stdout, result.stderr, result.exit_code, result.error) == ("", "", 0, None)


@pytest.mark.parametrize(
    "script",
    [
        "echo ${",
        "$(( 1 +",
        "echo $((1/0))",
        "f() { f; }; f",
        "a=(; )",
        "echo \x00 \udcff",
        "declare -n r=r; echo $r",
        "x='$((' ; eval \"$x\"",
        "set -- $(seq 1); shift 5",
        "printf '%*d' 999999999 1",
        "trap 'exit 3' EXIT; exit 1",
        "readonly IFS; IFS=x",
        "exec 3>&1",
        "echo ${x:-$(echo ${y:-$(echo z)})}",
        "case",
        "((",
        "[[ ",
        "${!}",
    ],
)
async def test_the_engine_never_raises(script: str) -> None:
    result = await run(script)
    assert isinstance(result.exit_code, int)
    assert "internal error" not in (result.error or "")


def test_runs_under_asyncio() -> None:
    async def tool(args: list[str], stdin: str | None) -> CommandResult:
        await asyncio.sleep(0.01)
        return CommandResult(stdout="from asyncio\n")

    async def main() -> str:
        result = await run_script(ScriptRequest("tool; echo done", commands={"tool": tool}))
        return result.stdout

    assert asyncio.run(main()) == "from asyncio\ndone\n"


def test_runs_under_trio() -> None:
    async def tool(args: list[str], stdin: str | None) -> CommandResult:
        await trio.sleep(0.01)
        return CommandResult(stdout="from trio\n")

    async def main() -> str:
        result = await run_script(ScriptRequest("tool; echo done", commands={"tool": tool}))
        return result.stdout

    assert trio.run(main) == "from trio\ndone\n"


async def test_caller_cancellation_propagates() -> None:
    async def hang(args: list[str], stdin: str | None) -> CommandResult:
        await anyio.sleep(30)
        return CommandResult()

    with anyio.move_on_after(0.1) as scope:
        await run("hang", {"hang": hang})
    assert scope.cancelled_caught


async def test_exit_trap_and_status() -> None:
    result = await run("trap 'echo bye $?' EXIT; echo hi; exit 4")
    assert (result.stdout, result.exit_code) == ("hi\nbye 4\n", 4)


async def test_xtrace_writes_to_stderr() -> None:
    result = await run("set -x; echo a b; set +x; echo c")
    assert result.stdout == "a b\nc\n"
    assert result.stderr == "+ echo a b\n+ set +x\n"


async def test_time_reports_on_stderr_like_the_peer() -> None:
    result = await run("time echo hi; time -p true; time -o f echo x; echo $?")
    assert result.stdout == "hi\n1\n"
    assert result.stderr == (
        "\nreal\t0m0.000s\nuser\tunavailable\nsys\tunavailable\n"
        "real 0.00\nuser unavailable\nsys unavailable\n"
        "time: output files disabled\n"
    )
