"""Warm cgroups: made while the host waits, taken once by a sandbox of exactly their shape,
dropped when the shape changes, all removed by retire; never shared."""

from __future__ import annotations

import os

import pytest

from sandbox import cgroup_pool, lifeline
from sandbox.launch import Command, prepare_launch, warm_up
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import retire

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]

TRUE = Command(("/bin/true",))


def warm_paths() -> list[str]:
    with cgroup_pool._lock:
        return [p for w in cgroup_pool._mine().ready for p in w.cgroup.paths]


def test_run_leaves_one_warm_set_and_the_next_launch_takes_it() -> None:
    run(SandboxPolicy(), ["/bin/true"], timeout=10)
    assert cgroup_pool.ready() == 1
    (warm,) = cgroup_pool._mine().ready
    plan = prepare_launch(SandboxPolicy(), TRUE)
    try:
        assert plan.cgroup is warm.cgroup and plan.uid == warm.uid  # its uid becomes ours
        assert cgroup_pool.ready() == 0
        other = prepare_launch(SandboxPolicy(), TRUE)  # none ready: made on the spot
        assert other.cgroup is not None and other.cgroup.name != warm.cgroup.name
        assert other.uid != plan.uid or other.uid_kind == "host"  # rootless: always its own
        other.abort()
    finally:
        plan.abort()
    assert not any(os.path.exists(p) for p in warm.cgroup.paths)


def test_a_policy_of_another_shape_or_uid_never_takes_a_warm_set() -> None:
    run(SandboxPolicy(), ["/bin/true"], timeout=10)
    (warm,) = cgroup_pool._mine().ready
    others = [SandboxPolicy(memory_bytes=256 << 20)]
    if os.geteuid() == 0:  # only root may give a sandbox a uid of the policy's choosing
        others.append(SandboxPolicy(sandbox_uid=0x70FFFFF0))
    for policy in others:
        plan = prepare_launch(policy, TRUE)
        assert plan.cgroup is not None and plan.cgroup is not warm.cgroup
        plan.abort()
    warm_up()  # the shape asked last (256 MiB) replaces the stale set, which is removed
    assert not any(os.path.exists(p) for p in warm.cgroup.paths)
    (fresh,) = cgroup_pool._mine().ready
    assert fresh.shape.memory_bytes == 256 << 20
    limit = os.path.join(fresh.cgroup.dirs["memory"], "memory.limit_in_bytes")
    with open(limit) as f:
        assert int(f.read()) == 256 << 20


def test_retire_removes_the_warm_sets_and_ends_the_lifeline() -> None:
    run(SandboxPolicy(), ["/bin/true"], timeout=10)
    paths = warm_paths()
    assert paths and all(os.path.exists(p) for p in paths)
    assert retire()
    assert not any(os.path.exists(p) for p in paths)
    assert cgroup_pool.ready() == 0 and lifeline._current.users == 0
