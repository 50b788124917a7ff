"""`sandbox.selfpath`: the sandvisor a fix line names runs when pasted, from anywhere, with
no PATH (``sudo`` resets it; root's has no user's venv). Real processes."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "sandvisor"
ASK = "from sandbox.selfpath import sandvisor_command; print(sandvisor_command())"


def named(argv: list[str], cwd: Path) -> list[str]:
    """The command ``argv`` (a sandvisor, or this interpreter) says runs sandvisor."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return shlex.split(done.stdout.strip().splitlines()[-1])


def runs_when_pasted(words: list[str], cwd: Path) -> None:
    assert os.path.isabs(words[0]), words
    done = subprocess.run(
        [*words, "doctor", "--delegate", "no-such-user-here"],
        cwd=cwd,
        env={"LANG": "C.UTF-8"},  # no PATH, no PYTHONPATH: as sudo would run it
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = "no user named" if os.geteuid() == 0 else "run it as root"
    assert done.returncode == 1 and said in done.stderr, done.stderr


def test_from_this_interpreter_the_installed_script_or_python_m(tmp_path: Path) -> None:
    words = named([sys.executable, "-c", ASK], tmp_path)
    if not SCRIPT.is_file():  # a checkout on PYTHONPATH: what sudo would run lacks it
        assert words == [sys.executable, "-m", "supervisor"]
        return
    assert words == [str(SCRIPT)]
    runs_when_pasted(words, tmp_path)


@pytest.mark.skipif(not SCRIPT.is_file(), reason="sandvisor is not installed in this venv")
def test_the_running_script_by_absolute_path_though_started_relative(tmp_path: Path) -> None:
    # the fix line of `doctor --delegate` as an ordinary user, or its plan's note as root
    rel = os.path.relpath(SCRIPT, tmp_path)
    done = subprocess.run(
        [rel, "doctor", "--delegate", "nobody"], cwd=tmp_path, capture_output=True, text=True
    )
    said = done.stdout if os.geteuid() == 0 else done.stderr
    assert f"{SCRIPT} doctor --delegate nobody --apply" in said, said
    if os.geteuid() != 0:
        assert f"(sudo {SCRIPT} doctor --delegate nobody --apply)" in said
    runs_when_pasted([str(SCRIPT)], tmp_path)
