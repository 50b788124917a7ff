"""The logic-only surface (reference-bashkit.md 4.1-4.2): what is refused, with which
message and status, and what the refusal leaves running."""

from __future__ import annotations

import pytest
from language_support import Recorder, run

from supervisor.scripted.contract import Command


@pytest.mark.parametrize(
    "name",
    [
        "ls",
        "mkdir",
        "rm",
        "cd",
        "pwd",
        "source",
        ".",
        "exec",
        "bash",
        "sh",
        "sleep",
        "date",
        "curl",
        "python3",
        "touch",
        "kill",
    ],
)
async def test_file_and_process_commands_are_not_found(name: str) -> None:
    result = await run(f"{name} x; echo status=$?")
    assert result.stdout == "status=127\n"
    assert result.stderr == f"bash: line 1: {name}: command not found\n"


async def test_path_execution_is_not_found() -> None:
    result = await run("/tmp/script.sh arg; ./x; echo $?")
    assert result.stderr == (
        "bash: line 1: /tmp/script.sh: command not found\nbash: line 1: ./x: command not found\n"
    )
    assert result.stdout == "127\n"


async def test_command_not_found_reports_the_line() -> None:
    result = await run("echo a\n\nxyzzy")
    assert (result.stdout, result.exit_code) == ("a\n", 127)
    assert result.stderr == "bash: line 3: xyzzy: command not found\n"


@pytest.mark.parametrize(
    ("name", "hint"),
    [  # as observed with bashkit 0.20.1 (the peer also offers its own extra builtins)
        ("cst", " Did you mean: cat, cut?"),
        ("date", " Did you mean: cat, paste?"),
        ("ll", " Did you mean: nl?"),
        ("sedd", " Did you mean: sed, head, read?"),
        ("get_usr", " Did you mean: get_user?"),
        ("tru", " Did you mean: tr, true?"),
        ("shft", " Did you mean: shift, set, shopt?"),
        ("ls", ""),
        ("exec", ""),
        ("bash", ""),
        ("declre", ""),
    ],
)
async def test_did_you_mean_hints_like_the_peer(name: str, hint: str) -> None:
    from supervisor.scripted.text_tools import TEXT_COMMANDS

    table: dict[str, Command] = {**TEXT_COMMANDS, "get_user": Recorder()}
    result = await run(name, table)
    suffix = "." + hint if hint else ""
    assert result.stderr == f"bash: line 1: {name}: command not found{suffix}\n"


@pytest.mark.parametrize(
    "redirect", ["> out", ">> out", "< in", "&> out", ">| out", "2> err", "&>> out"]
)
async def test_file_redirection_is_refused_and_the_command_does_not_run(redirect: str) -> None:
    tool = Recorder()
    target = redirect.split()[-1]
    result = await run(f"tool {redirect}; echo rc=$?; echo continues", {"tool": tool})
    assert tool.calls == []
    assert result.stdout == "rc=1\ncontinues\n"
    assert result.stderr == f"bash: line 1: {target}: filesystem redirection disabled\n"
    assert result.exit_code == 0 and result.error is None


async def test_redirection_target_is_checked_after_expansion() -> None:
    result = await run('f=/etc/passwd; echo x > "$f"; n=/dev/null; echo y > $n; echo z')
    assert result.stdout == "z\n"
    assert result.stderr == "bash: line 1: /etc/passwd: filesystem redirection disabled\n"


async def test_dev_stdout_is_refused_like_the_peer() -> None:
    result = await run("echo hi > /dev/stdout; echo $?")
    assert result.stdout == "1\n"


async def test_dev_null_redirections_work() -> None:
    tool = Recorder()
    result = await run(
        "echo gone > /dev/null; echo err 2>/dev/null >&2; tool < /dev/null; echo kept",
        {"tool": tool},
    )
    assert result.stdout == "kept\n" and result.stderr == ""
    assert tool.calls == [([], "")]


async def test_redirection_on_compound_command_is_checked() -> None:
    result = await run("{ echo a; } > file; while false; do :; done < input; echo end")
    assert result.stdout == "end\n"
    assert result.stderr.count("filesystem redirection disabled") == 2


@pytest.mark.parametrize(
    ("script", "where"),
    [
        ("diff <(echo a) <(echo b)", "line 1: <(...)"),
        ("echo before\ncat <(echo a)", "line 2: <(...)"),
        ("x=$(echo >(true))", "line 1: >(...)"),
        ("tool <(echo)", "line 1: <(...)"),
        ("read x > >(cat)", "line 1: >(...)"),
    ],
)
async def test_process_substitution_as_a_file_aborts_the_execution(script: str, where: str) -> None:
    message = (
        f"execution error: bash: process substitution disabled ({where} as a file name;"
        " read its output with < <(...) or a pipe)"
    )
    result = await run(script, {"tool": Recorder()})
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "",
        message,
        1,
        message,
    )


async def test_input_from_a_process_substitution_runs() -> None:
    result = await run("while read -r l; do echo \"<$l>\"; done < <(printf 'a\\nb\\n'); echo $?")
    assert (result.stdout, result.exit_code, result.error) == ("<a>\n<b>\n0\n", 0, None)


async def test_process_substitution_in_untaken_branch_is_harmless() -> None:
    result = await run("if false; then cat <(echo a); fi; echo fine")
    assert result.stdout == "fine\n" and result.error is None


async def test_file_tests_are_false() -> None:
    result = await run(
        "for t in -e -f -d -r -w -x -s -L -h -p -S -b -c; do [ $t / ] && echo yes || echo no; "
        "done | { c=0; while read r; do [ $r = no ] && c=$((c+1)); done; echo $c; }"
    )
    assert result.stdout == "13\n"


async def test_globbing_is_literal() -> None:
    result = await run("echo * /etc/* ?.txt [ab]")
    assert result.stdout == "* /etc/* ?.txt [ab]\n"


async def test_sandbox_identity_variables() -> None:
    result = await run("echo $$ $HOME $PWD $BASH_VERSION $USER $HOSTNAME ${BASH_VERSINFO[0]}")
    assert result.stdout == "1 /home/sandbox /home/user 5.2.15(1)-release sandbox sandvisor 5\n"


async def test_env_prints_pwd_and_the_request_env() -> None:
    result = await run("env; export LATER=1; printenv LATER", env={"ZED": "1", "ALPHA": "2"})
    assert result.stdout == "ALPHA=2\nPWD=/home/user\nZED=1\n1\n"


async def test_request_env_is_visible_and_exported() -> None:
    result = await run('echo "$TOKEN"; printenv TOKEN', env={"TOKEN": "abc"})
    assert result.stdout == "abc\nabc\n"


async def test_aliases_are_not_expanded() -> None:
    result = await run("alias ll='echo hi'; ll; echo $?")
    assert result.stdout == "127\n"
    assert "ll: command not found" in result.stderr


async def test_bad_file_descriptor() -> None:
    result = await run("echo x >&3; echo $?")
    assert result.stdout == "1\n"
    assert result.stderr == "bash: line 1: 3: Bad file descriptor\n"
