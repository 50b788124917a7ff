"""How a policy's limits are enforced on this machine: by a cgroup where one can be had,
per process where the policy accepts that, and what the second way gives up.

A cgroup of the sandbox's own (`sandbox.cgroups`) caps the whole sandbox: its memory in
total (the kernel's OOM killer ends it, and says so), its processes and threads. Where no
cgroup can be had (an ordinary user without a delegated subtree), a launch fails unless
the policy says ``limits="per-process"``; then:

- memory: ``RLIMIT_AS`` per process (an allocation past it fails; nothing caps the sum of
  the sandbox's processes, and there is no OOM kill to classify);
- processes: ``RLIMIT_NPROC``, which the kernel counts per uid. A sandbox with a fresh uid
  of its own (root's) gets exactly the policy's ``pids``. A sandbox that runs as the host's
  own uid shares that count with the host and every sibling sandbox, so ``pids=N`` as
  ``RLIMIT_NPROC=N`` would stop the host forking once the sandbox had its N (measured: at
  100, not even ``ps`` ran). It gets the host's own limit minus a reserve kept for the
  host: a ceiling on a fork bomb, not a per-sandbox count.

`Enforcement.weakened` says, in words, which guarantees a sandbox runs without; the
result (`Termination.weakened`) and ``sandvisor exec --report`` carry it.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Literal

from .cgroups import CgroupLayout
from .gate import read_value
from .policy import SandboxPolicy

#: Rlimits as (resource, soft, hard).
Rlimits = tuple[tuple[int, int, int], ...]

#: Whose uid a sandbox runs as: a fresh one of its own (root), the policy's
#: ``sandbox_uid`` (root), or the host's own (rootless).
UidKind = Literal["fresh", "fixed", "host"]

#: The smallest share of the host's process ceiling kept for the host itself.
MIN_RESERVE = 64


@dataclass(frozen=True)
class Enforcement:
    """A policy's limits as this launch applies them."""

    cgroup_memory: int | None  # memory.max / memory.limit_in_bytes, or None
    cgroup_pids: int | None  # pids.max, or None
    rlimits: Rlimits
    weakened: tuple[str, ...] = ()

    @property
    def per_process(self) -> bool:
        return bool(self.weakened)


def host_process_ceiling() -> int:
    """How many processes the host's uid may have: its own ``RLIMIT_NPROC`` (the soft
    limit, the one it is held to), and never more than the kernel's pid and thread
    ceilings (a bomb that exhausts them stops every user's forks, not only ours)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    bounds = [soft] if soft != resource.RLIM_INFINITY else []
    for path in ("/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"):
        value = read_value(path)
        if value is not None and value.isdigit():
            bounds.append(int(value))
    return min(bounds, default=32768)


def shared_uid_nproc(ceiling: int) -> tuple[int, int]:
    """(``RLIMIT_NPROC`` for a sandbox sharing the host's uid, the reserve kept for the
    host) out of the host's ``ceiling``."""
    reserve = max(MIN_RESERVE, ceiling // 8)
    return max(1, ceiling - reserve), reserve


def enforce(policy: SandboxPolicy, layout: CgroupLayout, uid: UidKind) -> Enforcement:
    """How ``policy``'s limits are applied on ``layout`` for a sandbox whose uid is
    ``fresh`` (root's, its own), ``fixed`` (the policy's ``sandbox_uid``) or ``host``
    (rootless: the host's own). Raises nothing: whether a missing cgroup is acceptable
    is the gate's to say (`sandbox.gate.require`)."""
    rlimits = base_rlimits(policy)
    weakened: list[str] = []
    memory = policy.memory_bytes
    cgroup_memory = memory if memory is not None and layout.provides("memory") else None
    if memory is not None and cgroup_memory is None:
        cap = min(memory, policy.address_space_bytes or memory)
        rlimits = _replace(rlimits, resource.RLIMIT_AS, cap)
        weakened.append(
            f"memory: RLIMIT_AS of {cap} bytes per process, not a cgroup: no cap on the "
            "sandbox's total, and no OOM kill to classify (an allocation fails instead)"
        )
    pids = policy.pids
    cgroup_pids = pids if pids is not None and layout.provides("pids") else None
    if pids is not None and cgroup_pids is None:
        if uid == "host":
            ceiling = host_process_ceiling()
            nproc, reserve = shared_uid_nproc(ceiling)
            rlimits = _replace(rlimits, resource.RLIMIT_NPROC, nproc)
            weakened.append(
                f"pids: not {pids} per sandbox but a ceiling of {nproc} processes for the "
                f"host's uid (RLIMIT_NPROC: the host's {ceiling} less {reserve} kept for "
                "the host), shared with the host and its other sandboxes"
            )
        else:
            rlimits = _replace(rlimits, resource.RLIMIT_NPROC, pids)
            shared = (
                "" if uid == "fresh" else f", shared by every sandbox of uid {policy.sandbox_uid}"
            )
            weakened.append(
                f"pids: RLIMIT_NPROC of {pids} for the sandbox's uid, not a cgroup (threads "
                f"count too; no pids counter to classify){shared}"
            )
    return Enforcement(cgroup_memory, cgroup_pids, rlimits, tuple(weakened))


def base_rlimits(policy: SandboxPolicy) -> Rlimits:
    """The rlimits every sandbox gets. CPU: soft < hard so SIGXCPU comes first."""
    limits = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, policy.open_files, policy.open_files),
    ]
    if policy.file_size_bytes is not None:
        limits.append((resource.RLIMIT_FSIZE, policy.file_size_bytes, policy.file_size_bytes))
    if policy.cpu_seconds is not None:
        limits.append((resource.RLIMIT_CPU, policy.cpu_seconds, policy.cpu_seconds + 1))
    if policy.address_space_bytes is not None:
        limits.append((resource.RLIMIT_AS, policy.address_space_bytes, policy.address_space_bytes))
    return tuple(limits)


def _replace(rlimits: Rlimits, res: int, value: int) -> Rlimits:
    return (*(r for r in rlimits if r[0] != res), (res, value, value))
