"""How limits are enforced: by cgroup where the layout offers one, per process where the
policy accepts that (and then what is given up, in words), refused otherwise. Pure rules
on described layouts, then real sandboxes launched without any cgroup."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest
from sandbox_helpers import PRELUDE, PYTHON, ROOTLESS, Watch, py_policy, read_line, run_json

from sandbox.cgroups import CgroupLayout, Hierarchy
from sandbox.errors import SandboxUnavailable
from sandbox.launch import Command, prepare_launch
from sandbox.limits import MIN_RESERVE, enforce, host_process_ceiling, shared_uid_nproc
from sandbox.policy import MiB, SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import spawn

NO_CGROUPS = CgroupLayout(())
FULL = CgroupLayout(
    (
        Hierarchy(1, "/sys/fs/cgroup/memory/sandvisor", frozenset({"memory"})),
        Hierarchy(1, "/sys/fs/cgroup/pids/sandvisor", frozenset({"pids"})),
    )
)
PIDS_ONLY = CgroupLayout((Hierarchy(2, "/sys/fs/cgroup/x/sandvisor", frozenset({"kill", "pids"})),))
PER_PROCESS = SandboxPolicy(limits="per-process")


def rlimit(rlimits: tuple[tuple[int, int, int], ...], res: int) -> int | None:
    return next((soft for r, soft, _ in rlimits if r == res), None)


def test_a_cgroup_where_the_layout_has_one_whatever_the_policy_accepts() -> None:
    for policy in (SandboxPolicy(), PER_PROCESS):
        e = enforce(policy, FULL, "fresh")
        assert (e.cgroup_memory, e.cgroup_pids) == (512 * MiB, 128)
        assert e.weakened == () and not e.per_process
        assert rlimit(e.rlimits, resource.RLIMIT_AS) is None
        assert rlimit(e.rlimits, resource.RLIMIT_NPROC) is None


def test_without_a_cgroup_memory_is_rlimit_as_per_process() -> None:
    e = enforce(PER_PROCESS, NO_CGROUPS, "host")
    assert e.cgroup_memory is None and rlimit(e.rlimits, resource.RLIMIT_AS) == 512 * MiB
    assert any("no cap on the sandbox's total" in w for w in e.weakened)
    # a smaller address-space limit of the policy's own wins
    e = enforce(PER_PROCESS.replace(address_space_bytes=128 * MiB), NO_CGROUPS, "host")
    assert rlimit(e.rlimits, resource.RLIMIT_AS) == 128 * MiB


def test_a_fresh_uid_gets_exactly_pids_and_a_shared_one_a_ceiling_never_pids() -> None:
    fresh = enforce(PER_PROCESS, NO_CGROUPS, "fresh")
    assert rlimit(fresh.rlimits, resource.RLIMIT_NPROC) == 128
    fixed = enforce(PER_PROCESS.replace(sandbox_uid=4242), NO_CGROUPS, "fixed")
    assert rlimit(fixed.rlimits, resource.RLIMIT_NPROC) == 128
    assert any("every sandbox of uid 4242" in w for w in fixed.weakened)
    host = enforce(PER_PROCESS, NO_CGROUPS, "host")
    nproc, _ = shared_uid_nproc(host_process_ceiling())
    assert rlimit(host.rlimits, resource.RLIMIT_NPROC) == nproc != 128
    assert any("shared with the host" in w for w in host.weakened)
    # only what the layout lacks goes per process
    mixed = enforce(PER_PROCESS, PIDS_ONLY, "host")
    assert mixed.cgroup_pids == 128 and rlimit(mixed.rlimits, resource.RLIMIT_NPROC) is None
    assert mixed.cgroup_memory is None and len(mixed.weakened) == 1


def test_the_host_keeps_a_reserve_of_its_own_process_ceiling() -> None:
    assert shared_uid_nproc(1024) == (896, 128)
    assert shared_uid_nproc(100) == (100 - MIN_RESERVE, MIN_RESERVE)
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    ceiling = host_process_ceiling()
    assert ceiling <= int(Path("/proc/sys/kernel/pid_max").read_text())
    assert soft == resource.RLIM_INFINITY or ceiling <= soft


def test_limits_set_to_none_need_no_cgroup() -> None:
    e = enforce(SandboxPolicy(memory_bytes=None, pids=None), NO_CGROUPS, "host")
    assert e.weakened == () and e.cgroup_memory is None and e.cgroup_pids is None


@pytest.mark.bwrap
def test_without_a_cgroup_the_default_policy_is_refused_with_the_fix() -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        run(SandboxPolicy(), ["true"], timeout=10, layout=NO_CGROUPS)
    assert "per-process" in caught.value.fix
    result = run(SandboxPolicy(memory_bytes=None, pids=None), ["true"], timeout=10,
                 layout=NO_CGROUPS)  # fmt: skip
    assert result.exit_status == 0 and result.termination.weakened == ()


FORK_BOMB = """
forked = 0
try:
    while True:
        if os.fork() == 0:
            signal.pause()
        forked += 1
except OSError as e:
    print(json.dumps({"forked": forked, "errno": errno.errorcode[e.errno]}), flush=True)
signal.pause()
"""


@pytest.mark.bwrap
def test_a_fork_bomb_under_per_process_limits_stops_short_of_the_host() -> None:
    """The bomb's forks fail at its uid's RLIMIT_NPROC: exactly pids for a root host's
    sandbox (a fresh uid of its own); for a rootless one, the host's ceiling less the
    reserve kept for the host, which still forks while the bomb holds all it could get."""
    ceiling = host_process_ceiling()
    if ROOTLESS and ceiling > 2048:
        pytest.skip(
            f"an ordinary user's fork bomb could reach {ceiling} processes here: the rootless "
            "'none' run gives its user a low RLIMIT_NPROC for this"
        )
    policy = py_policy(limits="per-process", pids=32)
    command = Command((PYTHON, "-S", "-c", PRELUDE + FORK_BOMB))
    plan = prepare_launch(policy, command, layout=NO_CGROUPS)
    with spawn(plan, stdout=subprocess.PIPE) as sandbox, Watch(sandbox) as watch:
        seen = json.loads(read_line(sandbox, timeout=120))
        assert seen["errno"] == "EAGAIN"
        if sandbox.uid_kind == "fresh":  # bwrap, its init and the program count too
            assert 20 <= seen["forked"] < 32
        else:  # a ceiling shared with the host, not pids
            nproc, _ = shared_uid_nproc(ceiling)
            assert 32 < seen["forked"] < nproc
        assert subprocess.run(["true"]).returncode == 0  # the host still forks
        sandbox.kill("done")
        sandbox.cleanup()
        assert watch.processes() == []


@pytest.mark.bwrap
def test_a_memory_bomb_under_per_process_limits_fails_its_allocation() -> None:
    code = """
try:
    block = bytearray(1 << 30)
    out({"allocated": True})
except MemoryError:
    out({"allocated": False})
"""
    policy = py_policy(limits="per-process", memory_bytes=256 * MiB)
    result = run(policy, ["true"], timeout=10, layout=NO_CGROUPS)
    assert any(w.startswith("memory: RLIMIT_AS") for w in result.termination.weakened)
    assert run_json(code, policy=policy, layout=NO_CGROUPS) == {"allocated": False}
