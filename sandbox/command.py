"""`Command`: what to run in a sandbox, and what it needs beyond the policy.

Apart from the launch (which imports it, and re-exports it) so that what builds
commands (`sandbox.pyworker`, `sandbox.netproxy.plan`) does not import the launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import PolicyError
from .policy import _ENV_KEY, RESERVED_DESTS, Bind, check_path, is_within


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
    #: Environment variables kept off bwrap's command line (secrets): bwrap reads them
    #: from a memfd (``--args``); ``env`` and the policy's are on its command line.
    private_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    #: Read-only files (mode 0444) written into the sandbox's root: path -> content.
    files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)

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
        for key, value in self.private_env.items():
            if not _ENV_KEY.match(key) or not isinstance(value, str) or "\0" in value:
                raise PolicyError(f"private environment variable {key!r} is not NAME=text")
        object.__setattr__(self, "private_env", MappingProxyType(dict(self.private_env)))
        for dest, content in self.files.items():
            check_path(dest, "file")
            if dest == "/" or any(is_within(dest, r) for r in RESERVED_DESTS if r != "/"):
                raise PolicyError(f"file {dest} is inside a path the sandbox layout owns")
            if not isinstance(content, str):
                raise PolicyError(f"the content of file {dest} must be a string")
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))
