"""Every execution limit aborts with its own message: exit 1, stdout discarded, ``error``
set (reference-bashkit.md 4.3), and a script can neither hang nor grow without bound."""

from __future__ import annotations

import time

import anyio
import pytest
from language_support import run

from supervisor.scripted.contract import CommandResult, execution_deadline


def assert_aborted(result, message: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.error == message
    assert result.stderr == message


async def test_command_count_limit() -> None:
    result = await run("echo visible; for ((;;)); do :; done", max_commands=50)
    assert_aborted(result, "resource limit exceeded: maximum command count exceeded (50)")


async def test_command_count_allows_work_under_the_limit() -> None:
    result = await run("for i in 1 2 3; do echo $i; done", max_commands=10)
    assert (result.stdout, result.exit_code) == ("1\n2\n3\n", 0)


async def test_loop_iteration_limit_per_loop() -> None:
    result = await run("while :; do :; done", max_loop_iterations=100)
    assert_aborted(result, "resource limit exceeded: maximum loop iterations exceeded (100)")


@pytest.mark.parametrize(("n", "ok"), [(9, True), (10, False)], ids=["nine-fits", "ten-exceeds"])
async def test_loop_limit_counts_condition_checks_like_bashkit(n: int, ok: bool) -> None:
    # bashkit 0.20.1: with max_loop_iterations=10, 9 iterations run and 10 abort
    result = await run(f"for ((i=0;i<{n};i++)); do :; done; echo done", max_loop_iterations=10)
    assert (result.error is None) is ok


async def test_loop_limit_is_per_loop_not_global() -> None:
    script = "for i in 1 2 3 4 5; do for j in 1 2 3 4 5; do :; done; done; echo ok"
    result = await run(script, max_loop_iterations=5)
    assert result.stdout == "ok\n"


async def test_total_loop_iteration_limit() -> None:
    script = "for i in $(seq 1 50); do for j in 1 2 3 4 5 6 7 8 9 10; do :; done; done"
    from supervisor.scripted.contract import Command

    def seq(args: list[str], stdin: str | None) -> CommandResult:
        return CommandResult(stdout="".join(f"{i}\n" for i in range(1, int(args[-1]) + 1)))

    commands: dict[str, Command] = {"seq": seq}
    result = await run(script, commands, max_total_loop_iterations=200)
    assert_aborted(result, "resource limit exceeded: maximum total loop iterations exceeded (200)")


async def test_function_depth_limit() -> None:
    result = await run("f() { f; }; f", max_function_depth=20)
    assert_aborted(result, "resource limit exceeded: maximum function depth exceeded (20)")


async def test_function_depth_allows_deep_enough_recursion() -> None:
    script = "d() { if (( $1 > 0 )); then d $(( $1 - 1 )); else echo bottom; fi; }; d 99"
    result = await run(script)
    assert result.stdout == "bottom\n"


async def test_command_substitution_depth_limit() -> None:
    result = await run("f() { echo $(f); }; f", max_subst_depth=8, max_function_depth=1000)
    assert_aborted(
        result, "resource limit exceeded: maximum command substitution depth exceeded (8)"
    )


async def test_subshell_depth_limit() -> None:
    result = await run("f() ( f ); f", max_subshell_depth=6, max_function_depth=1000)
    assert_aborted(result, "resource limit exceeded: maximum subshell depth exceeded (6)")


async def test_timeout_holds_against_a_cpu_bound_script() -> None:
    start = time.monotonic()
    result = await run(
        "while :; do x=$((x+1)); done",
        timeout_seconds=0.3,
        max_loop_iterations=10**9,
        max_total_loop_iterations=10**9,
        max_commands=10**9,
    )
    elapsed = time.monotonic() - start
    assert_aborted(result, "resource limit exceeded: execution timeout (300ms)")
    assert elapsed < 2.0


async def test_timeout_holds_against_an_awaiting_command() -> None:
    async def hang(args: list[str], stdin: str | None) -> CommandResult:
        await anyio.sleep(30)
        return CommandResult("never")

    start = time.monotonic()
    result = await run("echo before; hang", {"hang": hang}, timeout_seconds=0.2)
    assert_aborted(result, "resource limit exceeded: execution timeout (200ms)")
    assert time.monotonic() - start < 2.0


async def test_execution_deadline_is_published_to_commands() -> None:
    seen: list[float | None] = []

    def probe(args: list[str], stdin: str | None) -> CommandResult:
        seen.append(execution_deadline.get())
        return CommandResult()

    before = time.monotonic()
    await run("probe", {"probe": probe}, timeout_seconds=5)
    assert seen[0] is not None
    assert before + 4.5 < seen[0] < time.monotonic() + 5.5
    assert execution_deadline.get() is None  # reset after the run


async def test_a_command_that_times_out_on_the_deadline_lets_the_script_go_on() -> None:
    # a tool's own timeout (at execution_deadline) fails that command; the grace window
    # lets the rest of the script run, as bashkit's does
    async def slow(args: list[str], stdin: str | None) -> CommandResult:
        deadline = execution_deadline.get()
        assert deadline is not None
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            await anyio.sleep(10)
            return CommandResult("done\n")
        return CommandResult(stderr="slow: callback timeout\n", exit_code=1)

    result = await run("slow; echo rc=$?; echo after", {"slow": slow}, timeout_seconds=0.5)
    assert result.error is None
    assert result.stdout == "rc=1\nafter\n"
    assert result.stderr == "slow: callback timeout\n"


async def test_request_timeout_gives_124() -> None:
    async def hang(args: list[str], stdin: str | None) -> CommandResult:
        await anyio.sleep(30)
        return CommandResult()

    result = await run("echo partial; hang", {"hang": hang}, request_timeout=0.25)
    assert (result.stdout, result.exit_code, result.error) == ("", 124, "timeout")
    assert result.stderr == "sandvisor: execution timed out after 0.2s\n"


async def test_request_timeout_holds_against_cpu_bound_script() -> None:
    result = await run(
        "while :; do :; done",
        request_timeout=0.2,
        max_loop_iterations=10**9,
        max_total_loop_iterations=10**9,
        max_commands=10**9,
    )
    assert (result.exit_code, result.error) == (124, "timeout")
    assert result.stderr == "sandvisor: execution timed out after 0.2s\n"


async def test_stdout_is_truncated_at_the_cap() -> None:
    result = await run(
        "for i in $(echo 1 2 3 4 5 6 7 8 9); do echo 0123456789; done", max_stdout_bytes=25
    )
    assert result.exit_code == 0
    assert result.stdout == "0123456789\n0123456789\n012"
    assert result.stdout_truncated and not result.stderr_truncated


async def test_stdout_cap_counts_utf8_bytes() -> None:
    result = await run("echo ééééé", max_stdout_bytes=5)
    assert result.stdout == "éé"
    assert result.stdout_truncated


async def test_stderr_is_truncated_at_the_cap() -> None:
    result = await run("for i in 1 2 3; do echo oops >&2; done; echo ok", max_stderr_bytes=7)
    assert (result.stdout, result.stderr) == ("ok\n", "oops\noo")
    assert result.stderr_truncated and not result.stdout_truncated


async def test_value_size_limit_stops_string_doubling() -> None:
    result = await run("x=a; while :; do x=$x$x; done", max_value_bytes=100_000)
    assert_aborted(result, "resource limit exceeded: maximum value size exceeded (100000)")


async def test_value_size_limit_applies_to_pipes() -> None:
    result = await run(
        "for ((i=0;i<5000;i++)); do echo 0123456789; done | { read x; echo $x; }",
        max_value_bytes=10_000,
    )
    assert_aborted(result, "resource limit exceeded: maximum value size exceeded (10000)")


async def test_background_job_limit() -> None:
    async def wait_a_bit(args: list[str], stdin: str | None) -> CommandResult:
        await anyio.sleep(0.05)
        return CommandResult()

    result = await run(
        "for i in 1 2 3 4 5; do nap & done; wait", {"nap": wait_a_bit}, max_background_jobs=3
    )
    assert_aborted(result, "resource limit exceeded: maximum background jobs exceeded (3)")


async def test_input_too_large() -> None:
    result = await run("echo " + "x" * 200, max_input_bytes=100)
    assert_aborted(result, "parse error: input too large (205 bytes, max 100 bytes)")


async def test_ast_nesting_too_deep() -> None:
    script = "if true; then " * 30 + "echo" + "; fi" * 30
    result = await run(script, max_ast_depth=20)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.error is not None
    assert result.error.startswith("parse error: AST nesting too deep (21 levels, max 20)")


async def test_parser_fuel() -> None:
    result = await run("echo a\n" * 300, max_parser_operations=100)
    assert result.error == "parse error: parser fuel exhausted (101 operations, max 100)"


async def test_brace_expansion_is_bounded() -> None:
    result = await run("echo {1..100000000}")
    assert result.exit_code == 1
    assert result.error is not None and "brace expansion too large" in result.error


async def test_huge_exponent_does_not_stall() -> None:
    start = time.monotonic()
    result = await run("echo $((7**9223372036854775807)) $((2**(1<<62)))")
    assert result.exit_code == 0
    assert time.monotonic() - start < 1.0


async def test_deep_arithmetic_nesting_is_an_error_not_a_crash() -> None:
    result = await run("echo $((" + "(" * 500 + "1" + ")" * 500 + ")); echo after")
    assert result.exit_code == 1
    assert "expression recursion level exceeded" in result.stderr


async def test_replacement_cannot_explode() -> None:
    result = await run("x=aaaa; while :; do x=${x//?/$x}; done", max_value_bytes=1_000_000)
    assert_aborted(result, "resource limit exceeded: maximum value size exceeded (1000000)")


async def test_many_large_arguments_are_bounded() -> None:
    script = (
        "printf -v x '%*s' 10000 ''; x=${x// /a}; for i in 1 2 3 4 5 6; do x=$x$x; done; "
        "echo ${#x}; echo $x $x $x $x $x $x $x $x $x $x $x $x > /dev/null; echo never"
    )
    result = await run(script, max_value_bytes=1_000_000)
    assert_aborted(result, "resource limit exceeded: maximum value size exceeded (1000000)")


async def test_word_splitting_is_bounded() -> None:
    script = "printf -v x '%*s' 9000 ''; x=${x// /a }; for i in 1 2 3 4; do x=$x$x; done; set -- $x"
    result = await run(script)
    assert_aborted(result, "resource limit exceeded: maximum word count exceeded (100000)")


async def test_catastrophic_regex_cannot_hang() -> None:
    # ^(a+)+$ against a^n b takes 2^n steps in a backtracking engine
    script = (
        "printf -v x '%*s' 5000 ''; x=${x// /a}b; "
        "[[ $x =~ ^(a+)+$ ]] && echo match || echo no; "
        "shopt -s extglob; [[ $x == +(a|aa)c ]] && echo match || echo no"
    )
    start = time.monotonic()
    result = await run(script)
    assert result.stdout == "no\nno\n"
    assert time.monotonic() - start < 5.0


async def test_slow_pattern_work_is_stopped_by_the_timeout() -> None:
    script = (
        "printf -v x '%*s' 10000 ''; x=${x// /ab}; "
        "for i in 1 2 3 4 5 6 7 8 9 10; do y=${x//*a*a*a*a*c/}; done; echo done"
    )
    start = time.monotonic()
    result = await run(script, timeout_seconds=0.5)
    assert time.monotonic() - start < 3.0
    assert result.error is None or "execution timeout" in result.error


async def test_recursion_to_the_function_depth_limit_through_compound_commands() -> None:
    script = (
        "f() { if true; then for i in 1; do case a in a) if (( $1 > 0 )); then "
        "{ x=$(echo y); f $(( $1 - 1 )); }; else echo bottom; fi;; esac; done; fi; }; f 99"
    )
    result = await run(script)
    assert (result.stdout, result.error) == ("bottom\n", None)
