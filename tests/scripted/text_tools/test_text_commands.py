"""The table itself: every tool is there, refuses file operands in its own words
(reference-bashkit.md 4.2), answers --help, and bounds its output."""

from __future__ import annotations

import pytest
from text_support import run

from supervisor.scripted.contract import READS_STDIN
from supervisor.scripted.text_tools import TEXT_COMMANDS
from supervisor.scripted.text_tools.common import MAX_OUTPUT_BYTES

FS = "filesystem access disabled"


def test_table_has_every_tool() -> None:
    assert set(TEXT_COMMANDS) == {
        "jq", "grep", "sed", "awk", "sort", "uniq", "cut", "tr", "wc", "head", "tail",
        "seq", "expr", "tac", "rev", "nl", "paste", "fold", "cat", "tee", "base64",
        "basename", "dirname",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "stderr", "status"),
    [
        (["grep", "x", "/f"], f"grep: /f: {FS}\n", 2),
        (["head", "/f"], f"head: /f: {FS}\n", 1),
        (["tail", "/f"], f"tail: /f: {FS}\n", 1),
        (["jq", ".", "/f"], f"jq: error: Could not open file /f: {FS}\n", 2),
        (["sed", "p", "/f"], f"sed: can't read /f: {FS}\n", 2),
        (["awk", "1", "/f"], f"awk: fatal: cannot open file `/f' for reading: {FS}\n", 2),
        (["sort", "/f"], f"sort: /f: {FS}\n", 2),
        (["wc", "/f"], f"wc: /f: {FS}\n", 1),
        (["uniq", "/f"], f"uniq: /f: {FS}\n", 1),
        (["cut", "-f1", "/f"], f"cut: /f: {FS}\n", 1),
        (["tac", "/f"], f"tac: /f: {FS}\n", 1),
        (["rev", "/f"], f"rev: /f: {FS}\n", 1),
        (["nl", "/f"], f"nl: /f: {FS}\n", 1),
        (["paste", "/f"], f"paste: /f: {FS}\n", 1),
        (["fold", "/f"], f"fold: /f: {FS}\n", 1),
        (["cat", "/f"], f"cat: /f: {FS}\n", 1),
        (["base64", "/f"], f"base64: /f: {FS}\n", 1),
    ],
)
def test_file_operands_are_refused(argv: list[str], stderr: str, status: int) -> None:
    result = run(argv[0], *argv[1:], stdin="x\n")
    assert (result.stdout, result.stderr, result.exit_code) == ("", stderr, status)


@pytest.mark.parametrize(
    ("argv", "stderr", "status"),
    [
        (["sed", "-i", "s/a/b/"], f"sed: -i: {FS}\n", 4),
        (["sed", "-f", "script.sed"], f"sed: couldn't open file script.sed: {FS}\n", 1),
        (["sed", "w out.txt"], f"sed: couldn't open file out.txt: {FS}\n", 4),
        (["jq", "-f", "prog.jq"], f"jq: Could not open prog.jq: {FS}\n", 2),
        (["grep", "-r", "x"], f"grep: -r: {FS}\n", 2),
        (["sort", "-o", "out"], f"sort: open failed: out: {FS}\n", 2),
        (
            ["awk", "-f", "prog.awk"],
            f"awk: fatal: can't open source file `prog.awk' for reading: {FS}\n",
            2,
        ),
    ],
)
def test_options_that_need_files_are_refused(argv: list[str], stderr: str, status: int) -> None:
    result = run(argv[0], *argv[1:], stdin="a\n")
    assert (result.stdout, result.stderr, result.exit_code) == ("", stderr, status)


def test_dash_means_stdin() -> None:
    assert run("head", "-n1", "-", stdin="a\nb\n").stdout == "a\n"
    assert run("grep", "b", "-", stdin="a\nb\n").stdout == "b\n"
    assert run("jq", ".", "-", stdin="1").stdout == "1\n"


@pytest.mark.parametrize("tool", sorted(TEXT_COMMANDS))
def test_help_exits_zero(tool: str) -> None:
    result = run(tool, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.stdout


@pytest.mark.parametrize("tool", sorted(TEXT_COMMANDS))
def test_no_stdin_is_empty_input(tool: str) -> None:
    args = {
        "jq": ["."], "grep": ["x"], "sed": ["p"], "awk": ["1"], "tr": ["a", "b"],
        "cut": ["-f1"], "seq": ["2"], "expr": ["1"],
    }.get(tool, [])  # fmt: skip
    result = run(tool, *args, stdin=None)
    assert result.exit_code in (0, 1)
    if tool not in ("seq", "expr", "wc"):
        assert result.stdout == ""


def test_output_is_bounded() -> None:
    result = run("awk", 'BEGIN { while (1) printf "%1000s", "x" }')
    assert result.stdout == ""
    assert result.stderr == f"awk: output limit exceeded ({MAX_OUTPUT_BYTES} bytes)\n"
    assert result.exit_code == 2
    big = run("sed", "h;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G;G",
              stdin="x" * 1000 + "\n")  # fmt: skip
    assert big.exit_code == 0
    doubled = run("sed", ":a;G;h;ba", stdin="x\n")
    assert doubled.exit_code == 4
    assert "output limit exceeded" in doubled.stderr or "too many jumps" in doubled.stderr


def test_base64_output_is_bounded() -> None:
    result = run("base64", stdin="x" * 8_000_000)  # 10.7 MB of base64: over the cap
    assert (result.stdout, result.exit_code) == ("", 1)
    assert result.stderr == f"base64: output limit exceeded ({MAX_OUTPUT_BYTES} bytes)\n"


def test_basename_and_dirname_read_no_input() -> None:
    """In ``while read``, they leave the loop its lines (``reads_stdin`` is false)."""
    for tool in ("basename", "dirname"):
        assert getattr(TEXT_COMMANDS[tool], READS_STDIN)(["/a/b"]) is False
