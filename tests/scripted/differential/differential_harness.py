"""The differential harness: the same plain-bash script through /bin/bash and run_script.

Case files are ``cases_*.txt`` in this folder. A case starts with ``### <name>`` and runs to
the next ``###`` line. Directive lines (removed from the script before it runs):

* ``#! skip-bash-compare: <reason>`` a documented logic-only difference: the script is not
  run through bash; sandvisor's result must equal the expectations below instead.
* ``#! expect-exit: N`` the expected exit status (with skip-bash-compare; default 0).
* ``#! expect-stdout: <text>`` one expected stdout line (``<text>`` plus a newline); with
  skip-bash-compare and no such line, stdout must be empty.

bash runs the case as a script file, as a model's script runs (``/bin/bash --norc
--noprofile bash``, the file named ``bash`` so that ``$0`` is ``bash``), with only
``PATH=/usr/bin:/bin`` and ``LC_ALL=C.UTF-8`` in its environment, in an empty temporary
directory. (Run with ``-c``, bash differs from a script file in a few places: an
expansion error such as ``${x:?}`` exits 127 instead of 1, and ``FUNCNAME`` lacks
``main``.)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from supervisor.scripted.contract import CommandTable, ExecResult, ScriptRequest
from supervisor.scripted.shell.execution import run_script

HERE = Path(__file__).parent
BASH_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


@dataclass
class Case:
    name: str
    file: str
    script: str
    skip_reason: str | None = None
    expect_exit: int = 0
    expect_stdout: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


def parse_cases(path: Path) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    lines: list[str] = []

    def close() -> None:
        if current is not None:
            current.script = "".join(lines)
            cases.append(current)

    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("### "):
            close()
            current = Case(line[4:].strip(), path.name, "")
            lines = []
            continue
        if current is None:
            continue
        if line.startswith("#! "):
            key, _, value = line[3:].rstrip("\n").partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "skip-bash-compare":
                current.skip_reason = value
            elif key == "expect-exit":
                current.expect_exit = int(value)
            elif key == "expect-stdout":
                current.expect_stdout.append(value + "\n")
            else:
                raise ValueError(f"{path.name}: unknown directive {key!r} in {current.name}")
            continue
        lines.append(line)
    close()
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"{path.name}: duplicate case names {sorted(dupes)}")
    return cases


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(HERE.glob("cases_*.txt")):
        cases.extend(parse_cases(path))
    return cases


def run_bash(script: str) -> tuple[str, int]:
    """``script`` as a script file named ``bash``, found through ``PATH``: ``$0`` is
    ``bash`` and the working directory stays empty; its first line resets ``PATH`` on the
    same line (line numbers unchanged), and the file's directory is cut from the output
    (``BASH_SOURCE`` and ``caller`` name the file by the path it was found at)."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as bindir:
        Path(bindir, "bash").write_text(f"PATH={BASH_ENV['PATH']}; {script}")
        proc = subprocess.run(
            ["bash", "--norc", "--noprofile", "bash"],
            executable="/bin/bash",
            env={**BASH_ENV, "PATH": f"{bindir}:{BASH_ENV['PATH']}"},
            cwd=tmp,
            capture_output=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
        leftovers = os.listdir(tmp)
    assert not leftovers, f"case wrote files: {leftovers}"
    stdout = proc.stdout.decode("utf-8", "replace").replace(f"{bindir}/bash", "bash")
    return stdout, proc.returncode


def text_commands() -> CommandTable:
    """Engineer B's text tools (jq grep sed ...), when present."""
    try:
        from supervisor.scripted.text_tools import TEXT_COMMANDS
    except ImportError:  # pragma: no cover - only while the text tools are missing
        return {}
    return TEXT_COMMANDS


async def run_sandvisor(script: str) -> ExecResult:
    return await run_script(ScriptRequest(script, commands=text_commands()))
