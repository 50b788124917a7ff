"""`Command`: what it accepts, and a command's private environment and files in a real
sandbox (secrets: never on bwrap's command line, which every process of the host reads)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from sandbox_helpers import PRELUDE, PYTHON, py_policy

from sandbox.command import Command
from sandbox.errors import PolicyError
from sandbox.launch import prepare_launch
from sandbox.runner import run
from sandbox.spawn import spawn

SECRET = "s3cr3t-value-0123456789"
PATH = "/run/sandvisor/secrets/TOKEN"


def with_secret(argv: tuple[str, ...]) -> Command:
    return Command(argv, private_env={"TOKEN": SECRET}, files={PATH: SECRET})


def cmdlines_holding(value: bytes) -> list[str]:
    """Pids (of this pid namespace) whose command line holds ``value``."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if value in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def test_command_checks_private_env_and_files() -> None:
    with pytest.raises(PolicyError, match="private environment variable '1X'"):
        Command(("/bin/true",), private_env={"1X": "v"})
    with pytest.raises(PolicyError, match="private environment variable 'X'"):
        Command(("/bin/true",), private_env={"X": "a\0b"})
    with pytest.raises(PolicyError, match="inside a path the sandbox layout owns"):
        Command(("/bin/true",), files={"/proc/x": "v"})
    with pytest.raises(PolicyError, match="must be absolute"):
        Command(("/bin/true",), files={"run/x": "v"})
    assert SECRET not in repr(with_secret(("/bin/true",)))


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_private_env_and_files_reach_the_program_and_no_command_line() -> None:
    code = f"""
import stat
res = {{"env": os.environ.get("TOKEN"), "file": open("{PATH}").read(),
        "mode": oct(stat.S_IMODE(os.stat("{PATH}").st_mode))}}
try:
    open("{PATH}", "w"); res["write"] = "wrote"
except OSError as e:
    res["write"] = errno.errorcode.get(e.errno)
secret = os.environ["TOKEN"].encode()  # not in this code: it would be in our own argv
res["cmdlines"] = [p for p in os.listdir("/proc") if p.isdigit()
                   and secret in open(f"/proc/{{p}}/cmdline", "rb").read()]
out(res)
"""
    result = run(py_policy(), with_secret((PYTHON, "-S", "-c", PRELUDE + code)), timeout=30)
    assert result.termination.exit_code == 0, result.stderr
    res = json.loads(result.stdout.decode().splitlines()[-1])
    assert res == {"env": SECRET, "file": SECRET, "mode": "0o444", "write": "EROFS",
                   "cmdlines": []}  # fmt: skip


@pytest.mark.bwrap
@pytest.mark.cgroup
def test_the_host_sees_no_secret_on_any_command_line() -> None:
    plan = prepare_launch(py_policy(), with_secret(("/bin/sh", "-c", "echo up; sleep 30")))
    assert "--args" in plan.argv and not any(SECRET in arg for arg in plan.argv)
    with spawn(plan, stdout=subprocess.PIPE) as sandbox:
        assert sandbox.popen.stdout is not None
        assert sandbox.popen.stdout.readline() == b"up\n"  # bwrap and the program run now
        assert cmdlines_holding(SECRET.encode()) == []
        sandbox.kill("done")
