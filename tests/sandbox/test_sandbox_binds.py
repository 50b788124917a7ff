"""Bind sources: checked on the filesystem, then mounted from the very fd that was checked
(``--ro-bind-fd``), or, as root for what the sandbox's uid cannot reach, pinned."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.gate import bwrap_binds_by_fd
from sandbox.launch import Command, prepare_launch
from sandbox.policy import Bind, SandboxPolicy
from sandbox.spawn import spawn


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every uid can read (pytest's tmp_path is its user's alone), outside
    /tmp (where root pins a source: the stage would hide it)."""
    path = Path(tempfile.mkdtemp(prefix="sandvisor-binds-", dir="/var/tmp"))  # not /tmp: staged
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_this_bwrap_binds_from_an_fd() -> None:
    assert bwrap_binds_by_fd()  # Debian 12's 0.8.0 has --ro-bind-fd, as 0.10 upstream


@pytest.mark.bwrap
def test_what_was_checked_is_what_is_mounted_even_if_the_path_changes(shared_dir: Path) -> None:
    """The check and the mount are one object: a directory put in the checked one's place
    between the launch's check and bwrap's mount is not what the sandbox sees (bound by
    path, it would be)."""
    for name, text in (("data", "checked"), ("other", "swapped in")):
        (shared_dir / name).mkdir(mode=0o755)
        (shared_dir / name / "which").write_text(text + "\n")
        (shared_dir / name / "which").chmod(0o644)
    checked = shared_dir / "data"
    policy = SandboxPolicy(binds=(Bind(str(checked), "/srv/data"),))
    plan = prepare_launch(policy, Command(("/bin/cat", "/srv/data/which")))
    assert "--ro-bind-fd" in plan.argv and str(checked) not in plan.argv
    checked.rename(shared_dir / "was-data")
    (shared_dir / "other").rename(checked)  # another directory at the checked path
    with spawn(plan, stdout=subprocess.PIPE) as sandbox:
        assert sandbox.popen.stdout is not None
        out = sandbox.popen.stdout.read()
        assert sandbox.wait(10) == 0
    assert out == b"checked\n"
