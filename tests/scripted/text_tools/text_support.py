"""Helpers for the text tool tests: run a tool as the interpreter would, and run the
real GNU tool / gawk / jq 1.6 for the cross-checks (skipped where one is missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from supervisor.scripted.contract import CommandResult
from supervisor.scripted.text_tools import TEXT_COMMANDS

ORACLE_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def run(tool: str, *args: str, stdin: str | None = "") -> CommandResult:
    result = TEXT_COMMANDS[tool](list(args), stdin)
    assert isinstance(result, CommandResult)
    return result


def out(tool: str, *args: str, stdin: str | None = "") -> str:
    """stdout of a run that must succeed (exit 0)."""
    result = run(tool, *args, stdin=stdin)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exit_code)
    return result.stdout


def oracle_available(tool: str) -> bool:
    if tool == "awk":
        path = shutil.which("awk", path=ORACLE_ENV["PATH"])
        if path is None:
            return False
        version = subprocess.run([path, "--version"], capture_output=True, text=True)
        return version.stdout.startswith("GNU Awk")
    if tool == "jq":
        path = shutil.which("jq", path=ORACLE_ENV["PATH"])
        if path is None:
            return False
        version = subprocess.run([path, "--version"], capture_output=True, text=True)
        return version.stdout.strip() == "jq-1.6"
    return shutil.which(tool, path=ORACLE_ENV["PATH"]) is not None


def oracle(tool: str, args: list[str], stdin: str) -> tuple[str, int]:
    """stdout and exit status of the real tool, in an empty directory."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [tool, *args],
            input=stdin.encode(),
            capture_output=True,
            env=ORACLE_ENV,
            cwd=tmp,
            timeout=20,
        )
        assert not os.listdir(tmp)
    return proc.stdout.decode("utf-8", "replace"), proc.returncode
