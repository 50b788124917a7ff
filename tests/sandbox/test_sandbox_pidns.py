"""`sandbox.pidns` on real processes: a namespace's inode, pinning it (never the host's
own), its members, and a process's parent and children."""

from __future__ import annotations

import os
import subprocess

import pytest
from sandbox_helpers import wait_for

from sandbox import pidns
from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.spawn import spawn

pytestmark = [pytest.mark.bwrap]


def test_parent_children_and_inode_of_plain_processes() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert pidns.parent_of(child.pid) == os.getpid()
        assert child.pid in pidns.children(os.getpid())  # forked by this (main) thread
        assert pidns.inode_of(child.pid) == pidns.inode_of(os.getpid())
        fd = os.pidfd_open(child.pid)
        try:
            assert pidns.alive(fd)
            assert pidns.pin(child.pid, fd, None) is None  # the host's own: never pinned
        finally:
            os.close(fd)
    finally:
        child.kill()
        child.wait()
    assert pidns.inode_of(child.pid) is None and pidns.parent_of(child.pid) is None


def test_a_sandbox_namespace_is_pinned_and_lists_exactly_its_processes() -> None:
    policy = SandboxPolicy(memory_bytes=None, pids=None)
    command = Command(("/bin/sh", "-c", "sleep 30 & sleep 30 & wait"))
    with spawn(prepare_launch(policy, command)) as sandbox:
        assert wait_for(lambda: sandbox.status.child_pid is not None)
        init = sandbox.status.child_pid
        assert init is not None
        inode = sandbox.status.pid_namespace
        assert inode is not None and pidns.inode_of(init) == inode
        assert pidns.parent_of(init) == sandbox.pid and pidns.children(sandbox.pid) == [init]
        fd = os.pidfd_open(init)
        assert pidns.pin(init, fd, inode + 1) is None  # not the namespace bwrap named
        ns = pidns.pin(init, fd, inode)
        assert ns is not None
        try:
            members = pidns.members(ns)
            assert init in members and sandbox.pid not in members
            sandbox.kill("done")
            sandbox.wait(10)
            # the namespace's last processes may still be exiting when bwrap is reaped
            assert wait_for(lambda: not pidns.alive(fd) and pidns.members(ns) == set())
        finally:
            os.close(ns)
            os.close(fd)
