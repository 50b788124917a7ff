"""The distribution installs and its command answers."""

import subprocess
import sys


def test_cli_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "supervisor", "--help"], capture_output=True, text=True, check=True
    )
    assert "doctor" in out.stdout
    assert "exec" in out.stdout
