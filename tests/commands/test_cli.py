"""The command line of the hosting commands: help for every command, exit codes, errors in
one line, ``--json``, ``sandvisor script``, ``sandvisor tools``, and ``sandvisor demo``
end to end, as a user runs them."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from hosting_helpers import SANDVISOR, child_env

from supervisor.commands.cli import COMMANDS, main
from supervisor.commands.demo import Display, Row, table

HOSTING_COMMANDS = ("demo", "script", "tools", "serve", "mcp")


def sandvisor(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SANDVISOR, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env or child_env())  # fmt: skip


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``sandvisor ARGS`` run in this process (fast): status, stdout, stderr."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {text!r}"
    return lines[0]


@pytest.mark.parametrize("command", HOSTING_COMMANDS)
def test_every_command_has_help_with_its_exit_statuses(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = in_process(capsys, command, "--help")
    assert (code, err) == (0, "")
    assert "Exit status" in " ".join(out.split())


def test_the_top_level_help_lists_every_command() -> None:
    run = sandvisor("--help")  # the real entry point, in a fresh process
    assert run.returncode == 0
    for name in COMMANDS:
        assert name in run.stdout
    assert sandvisor().returncode == 2


def test_script_runs_with_local_tools_and_exits_with_its_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_tools.py").write_text(textwrap.dedent(
        """
        from supervisor.scripted import ScriptedTool

        shop = ScriptedTool("shop")
        shop.add_tool("greet", "Say hello", lambda params, stdin: f"hello {params['to']}\\n",
                      schema={"type": "object", "properties": {"to": {"type": "string"}}})
        """
    ))  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = in_process(capsys, "script", "--scripted", "my_tools:shop", "-c",
                              "greet --to ann; exit 3")  # fmt: skip
    assert (code, out) == (3, "hello ann\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("greet --to bo | tr a-z A-Z"))
    code, out, _ = in_process(capsys, "script", "--scripted", "my_tools:shop", "--json", "-")
    assert code == 0 and json.loads(out)["stdout"] == "HELLO BO\n"
    code, _, err = in_process(capsys, "script", "--scripted", "my_tools:nothing", "-c", "true")
    assert code == 2 and "no attribute" in one_line(err)
    code, out, _ = in_process(capsys, "tools", "--scripted", "my_tools:shop")
    assert code == 0 and json.loads(out)[0]["function"]["name"] == "shop"


def test_usage_errors_are_one_line_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args, fragment in [
        (("script", "-c", "true"), "no tools"),
        (("script", "--example", "--scripted", "x:y", "-c", "true"), "not both"),
        (("script", "--example", str(tmp_path / "missing.sh")), "cannot read"),
        (("mcp",), "no tools"),
        (("tools", "--scripted", "nomodule_xyz:thing"), "cannot import"),
    ]:
        code, _, err = in_process(capsys, *args)
        assert code == 2, (args, err)
        line = one_line(err)
        assert line.startswith(f"sandvisor {args[0]}: ") and fragment in line, line
    code, _, err = in_process(capsys, "serve", "--pool-size", "0")
    assert code == 2 and "at least 1" in err  # argparse's own usage error


def test_a_machine_that_cannot_sandbox_gets_one_line_and_status_125() -> None:
    env = {**child_env(), "SANDVISOR_BWRAP": "/nonexistent/bwrap"}  # a fresh process: no cache
    for args in (("demo",), ("script", "--example", "-c", "true")):
        run = sandvisor(*args, env=env)
        assert (run.returncode, run.stdout) == (125, "")
        assert "sandvisor doctor" in one_line(run.stderr)


def test_script_and_tools_with_sandboxed_tools() -> None:
    script = "get_product --id 3 | jq -c '{name, stock, price}' | report.render"
    run = sandvisor("script", "--example", "-c", script)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("lantern") and "total" in run.stdout
    run = sandvisor("tools", "--example", "--format", "anthropic", "--discovery")
    assert run.returncode == 0, run.stderr
    script, discover = json.loads(run.stdout)
    assert (script["name"], discover["name"]) == ("shop", "shop_discover")
    assert "report.render" in script["description"]


def test_the_demo_runs_end_to_end() -> None:
    began = time.monotonic()
    run = sandvisor("demo", timeout=120)
    took = time.monotonic() - began
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "report.render: rendering 4/4: compass" in out  # plain progress lines (no TTY)
    assert "\x1b[" not in out
    table = out[out.index("summary") :]
    for tool, status in [("script (shop)", "completed"), ("report.render", "completed"),
                         ("feed.fetch", "indeterminate"), ("stock.check", "completed"),
                         ("archive.export", "cancelled")]:  # fmt: skip
        row = next(line for line in table.splitlines() if line.split("  ")[1:2] == [tool]
                   or f" {tool} " in line)  # fmt: skip
        assert status in row, row
    assert "Everything behaved as designed" in out
    print(f"sandvisor demo took {took:.1f} s")


def test_the_demo_summary_as_json() -> None:
    run = sandvisor("demo", "--json", timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["ok"] is True
    assert [(r["tool"], r["status"]) for r in summary["rows"]] == [
        ("script (shop)", "completed"), ("report.render", "completed"),
        ("feed.fetch", "indeterminate"), ("stock.check", "completed"),
        ("archive.export", "cancelled"),
    ]  # fmt: skip
    assert all(r["as_designed"] for r in summary["rows"])


def test_the_demo_display_redraws_one_line_on_a_terminal() -> None:
    stream = io.StringIO()
    display = Display(stream, live=True)
    display.progress("tool", "step 1")
    display.progress("tool", "step 2")
    display.say("done")
    assert stream.getvalue() == ("\r\x1b[2K    tool: step 1\r\x1b[2K    tool: step 2\ndone\n")
    plain = io.StringIO()
    Display(plain, live=False).progress("tool", "step 1")
    assert plain.getvalue() == "    tool: step 1\n"
    quiet = io.StringIO()
    Display(quiet, live=True, quiet=True).say("nothing")
    assert quiet.getvalue() == ""
    rows = [Row("1", "a.tool", "completed", 0.5, "fine", "completed"),
            Row("2", "b", "failed", 1.25, "", "cancelled")]  # fmt: skip
    lines = table(rows).splitlines()
    assert lines[0].split() == ["step", "tool", "status", "time", "note"]
    assert "0.50 s" in lines[2] and "1.25 s" in lines[3]
    assert [r.as_designed for r in rows] == [True, False]


def test_ctrl_c_stops_the_demo_with_one_line_and_nothing_left() -> None:
    demo = subprocess.Popen([*SANDVISOR, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env())  # fmt: skip
    assert demo.stdout is not None
    for line in demo.stdout:  # wait until the workers are up
        if line.startswith("sandvisor demo: 2 sandboxed workers up"):
            break
    workers = psutil.Process(demo.pid).children(recursive=True)
    demo.send_signal(signal.SIGINT)
    _, err = demo.communicate(timeout=30)
    assert demo.returncode == 130
    assert one_line(err) == "sandvisor demo: interrupted"
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
