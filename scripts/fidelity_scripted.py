#!/usr/bin/env python3
"""How many realistic scripts sandvisor runs exactly as GNU bash does, and bashkit 0.20.1
on the same scripts, in one run (bash decides: stdout and exit status must be equal).

The scripts are the differential cases (``tests/scripted/differential/cases_*.txt``, the
format of ``differential_harness.py``); by default the realistic ones
(``cases_realistic_*.txt``: JSON munging with jq, while-read loops, awk aggregations, sed
templates, parameter expansion, errexit edge cases, functions, tool-like orchestration).
A case marked ``skip-bash-compare`` (a documented logic-only difference) still counts
here: it does not match bash. bash runs each script as a script file named ``bash``, as
the harness does; bashkit as ``Bash().execute_sync`` (its full shell: it has a virtual
filesystem, so it is not refused what sandvisor refuses).

Run: ``.venv/bin/python scripts/fidelity_scripted.py [-v] [--no-bashkit] [FILE ...]``.
With ``PYTHONPATH=<an older checkout>`` the same cases measure that checkout.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "scripted" / "differential"
BASH_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def parse_cases(path: Path) -> list[tuple[str, str]]:
    """(name, script) of each ``### name`` case; directive lines are dropped."""
    cases: list[tuple[str, str]] = []
    name: str | None = None
    lines: list[str] = []
    for line in [*path.read_text().splitlines(keepends=True), "### end\n"]:
        if line.startswith("### "):
            if name is not None:
                cases.append((name, "".join(lines)))
            name, lines = line[4:].strip(), []
        elif name is not None and not line.startswith("#! "):
            lines.append(line)
    return cases


def run_bash(script: str) -> tuple[str, int]:
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as bindir:
        Path(bindir, "bash").write_text(f"PATH={BASH_ENV['PATH']}; {script}")
        proc = subprocess.run(
            ["bash", "--norc", "--noprofile", "bash"],
            executable="/bin/bash",
            env={**BASH_ENV, "PATH": f"{bindir}:{BASH_ENV['PATH']}"},
            cwd=cwd,
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    stdout = proc.stdout.decode("utf-8", "replace").replace(f"{bindir}/bash", "bash")
    return stdout, proc.returncode


def sandvisor_runner():  # type: ignore[no-untyped-def]
    """``script -> (stdout, status)`` through ``run_script`` with the text tools (the
    module paths of the current layout, or of an older checkout's)."""
    import trio

    try:
        from supervisor.scripted.contract import ScriptRequest
        from supervisor.scripted.shell.execution import run_script
        from supervisor.scripted.text_tools import TEXT_COMMANDS
    except ImportError:  # before the move to syntax/, shell/, text_tools/
        from supervisor.scripted.builtins import TEXT_COMMANDS  # type: ignore[no-redef]
        from supervisor.scripted.contract import ScriptRequest
        from supervisor.scripted.engine import run_script  # type: ignore[no-redef]

    def run(script: str) -> tuple[str, int]:
        result = trio.run(run_script, ScriptRequest(script, commands=TEXT_COMMANDS))
        return result.stdout, result.exit_code

    return run


def bashkit_run(script: str) -> tuple[str, int]:
    from bashkit import Bash

    try:
        result = Bash(timeout_seconds=10).execute_sync(script)
    except Exception as exc:  # a crash of the peer is a mismatch, not the end of the run
        return f"<bashkit raised {type(exc).__name__}>", -1
    return result.stdout, result.exit_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="show each mismatch")
    parser.add_argument("--no-bashkit", action="store_true")
    args = parser.parse_args()
    files = args.files or sorted(CASES.glob("cases_realistic_*.txt"))
    ours = sandvisor_runner()
    total = ok_ours = ok_theirs = 0
    print(f"{'file':<34} {'cases':>5} {'sandvisor':>9} {'bashkit':>8}")
    for path in files:
        n = mine = theirs = 0
        for name, script in parse_cases(path):
            want = run_bash(script)
            got = ours(script)
            n += 1
            mine += got == want
            if not args.no_bashkit:
                theirs += bashkit_run(script) == want
            if got != want and args.verbose:
                print(f"  differs: {path.name}::{name}\n    bash: {want!r}\n    ours: {got!r}")
        total, ok_ours, ok_theirs = total + n, ok_ours + mine, ok_theirs + theirs
        peer = "" if args.no_bashkit else f"{theirs:>8}"
        print(f"{path.name:<34} {n:>5} {mine:>9} {peer}")
    peer = "" if args.no_bashkit else f"{ok_theirs:>8}"
    print(f"{'total':<34} {total:>5} {ok_ours:>9} {peer}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
