"""What dead hosts left behind: found without launching anything, and swept (`doctor`
reports them, ``doctor --sweep`` removes them): cgroups named after a dead host, and a
sandbox init whose bwrap is gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

import pytest
from sandbox_helpers import alive, sandvisor, wait_for

from sandbox import leftovers
from sandbox.cgroups import detect_layout
from sandbox.probe import check_leftovers

pytestmark = [pytest.mark.bwrap]

DEAD_HOST = f"sv-999999999-1-1-{os.geteuid()}-{os.getpid():x}"


@pytest.mark.cgroup
def test_cgroups_of_a_dead_host_are_reported_and_swept() -> None:
    """(Any host's first launch collects a dead host's cgroups too, and other hosts run on
    this machine: what one of them collected meanwhile is gone, as it should be.)"""
    stale = [os.path.join(h.parent, DEAD_HOST) for h in detect_layout().hierarchies]
    try:
        for path in stale:
            os.mkdir(path)
        found, check = leftovers.find(), check_leftovers()
        if all(os.path.exists(path) for path in stale):
            assert set(stale) <= set(found.cgroups) and "cgroups of dead hosts" in found.describe()
            assert check.status == "warning" and check.fix.startswith("sandvisor doctor --sweep")
        swept = sandvisor("doctor", "--sweep")
        assert swept.returncode == 0, swept.stderr
        assert not any(os.path.exists(path) for path in stale)
        assert not set(stale) & set(leftovers.find().cgroups)
    finally:
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_an_init_whose_bwrap_is_gone_is_an_orphan_and_swept() -> None:
    """A stand-in: pid 1 of a namespace of its own, with a sandvisor bwrap's tagged command
    line, whose parent is no such bwrap."""
    code = "import os; os.execv('/bin/sleep', ['sandvisor-bwrap:0123abcd', '60'])"
    holder = subprocess.Popen(
        ["unshare", "--user", "--pid", "--fork", "--kill-child", "/usr/bin/python3", "-c", code]
    )
    try:
        assert wait_for(lambda: _orphan_of(holder.pid) is not None)
        orphan = _orphan_of(holder.pid)
        assert orphan in leftovers.find().orphans
        left = leftovers.sweep()
        assert orphan not in left.orphans and wait_for(lambda: not alive(orphan))
    finally:
        holder.kill()
        holder.wait()


def _orphan_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return None
    return next((c for c in children if c in leftovers.orphaned_inits()), None)
