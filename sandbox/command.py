"""`Command`: what to run in a sandbox, and what it needs beyond the policy.

Apart from the launch (which imports it, and re-exports it) so that what builds
commands (`sandbox.pyworker`, `sandbox.netproxy.plan`) does not import the launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import PolicyError
from .policy import Bind, check_path


@dataclass(frozen=True)
class Command:
    """What to run in the sandbox, and what it needs beyond the policy."""

    argv: tuple[str, ...]
    binds: tuple[Bind, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    masks: tuple[str, ...] = ()  # paths hidden under an empty read-only tmpfs
    cwd: str = "/tmp"
    #: The program starts the network forwarder itself (a worker: `worker_runtime`);
    #: else, under a network allowlist, the launch puts the forwarder in front of it.
    forwards_network: bool = False

    def __post_init__(self) -> None:
        argv = tuple(self.argv)
        if not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
            raise PolicyError(f"command must be non-empty strings without NUL: {argv!r}")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "binds", tuple(self.binds))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        for mask in self.masks:
            check_path(mask, "mask")
        check_path(self.cwd, "working directory")
