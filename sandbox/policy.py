"""`SandboxPolicy`: what a sandbox may see and use, validated when it is built.

The defaults are the safe ones: no network, an empty environment but for a fixed
allowlist, nothing of the host's files but the system runtime, a small private ``/tmp``,
memory and pids limits, seccomp on. Everything beyond that is explicit: a bind, an
environment variable, ``network=True``, a limit set to ``None``. Paths are checked here
lexically (absolute, normalised); the launch checks them again on the filesystem (no
symlink anywhere on the path) and pins what it checked, so the check is the mount.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from .errors import PolicyError

if TYPE_CHECKING:
    from .netproxy.policy import NetworkAllowlist

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: The environment every sandbox starts with unless the policy says otherwise.
DEFAULT_ENV: Mapping[str, str] = MappingProxyType(
    {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
    }
)

#: Destinations the sandbox layout owns; a bind may not replace or enter them.
RESERVED_DESTS = ("/", "/proc", "/dev", "/sys", "/tmp", "/etc/passwd", "/etc/group")

#: Host uids that must never run a sandbox (root, and the overflow ids).
_FORBIDDEN_UIDS = frozenset({0, 65534, 2**32 - 1})

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_HOSTNAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")

SeccompProfile = Literal["default"]

#: How ``memory_bytes`` and ``pids`` are enforced: ``"cgroup"`` only (the default), or
#: ``"per-process"`` accepted where no cgroup can be had (`sandbox.limits`).
LimitsMode = Literal["cgroup", "per-process"]


def check_path(path: str, what: str) -> str:
    """An absolute, normalised path (no ``..``, ``.``, ``//`` or trailing slash), or raise."""
    if not isinstance(path, str) or not path:
        raise PolicyError(f"{what} must be a non-empty string, not {path!r}")
    if "\0" in path:
        raise PolicyError(f"{what} contains a NUL byte: {path!r}")
    if not path.startswith("/"):
        raise PolicyError(f"{what} must be absolute: {path!r}")
    if os.path.normpath(path) != path or path.startswith("//"):
        raise PolicyError(
            f"{what} must be normalised (no '..', '.', '//' or trailing '/'): {path!r}; "
            f"did you mean {os.path.normpath(path)!r}?"
        )
    return path


def is_within(path: str, parent: str) -> bool:
    """``path`` is ``parent`` or below it (both absolute and normalised)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@dataclass(frozen=True)
class Bind:
    """A host path made visible in the sandbox at ``dest`` (default: the same path).

    Read-only unless ``writable``. The source must exist and may not be, or pass through,
    a symlink (checked at launch, where it is pinned with ``openat2(RESOLVE_NO_SYMLINKS)``).
    A writable bind must also be writable by the sandbox's host uid: the sandbox never
    runs as host root, so a root-owned directory stays read-only to it.
    """

    source: str
    dest: str = ""
    writable: bool = False

    def __post_init__(self) -> None:
        check_path(self.source, "bind source")
        if not self.dest:
            object.__setattr__(self, "dest", self.source)
        check_path(self.dest, "bind destination")
        for reserved in RESERVED_DESTS:
            inside = reserved != "/" and is_within(self.dest, reserved)
            if self.dest == reserved or (inside and reserved in ("/proc", "/dev", "/sys")):
                raise PolicyError(
                    f"bind destination {self.dest!r} is reserved by the sandbox layout "
                    f"({reserved} is provided by sandvisor)"
                )

    @classmethod
    def parse(cls, spec: str, *, writable: bool) -> Bind:
        """``SRC`` or ``SRC:DEST`` as given on the command line."""
        source, colon, dest = spec.partition(":")
        if colon and not dest:
            raise PolicyError(f"bind {spec!r}: empty destination after ':'")
        return cls(source, dest, writable)


def _allowlist(network: object) -> NetworkAllowlist:
    """``network=[...]`` as a `NetworkAllowlist` (imported only when a policy has one)."""
    from .netproxy.policy import NetworkAllowlist

    if isinstance(network, NetworkAllowlist):
        return network
    if isinstance(network, str) or not isinstance(network, Sequence):
        raise PolicyError(
            f"network must be False, True or a list of HOST[:PORT] patterns, not {network!r}"
        )
    return NetworkAllowlist(tuple(network))


def _positive(name: str, value: int | None, minimum: int, allow_none: bool = True) -> None:
    if value is None:
        if not allow_none:
            raise PolicyError(f"{name} may not be None")
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{name} must be an int, not {value!r}")
    if value < minimum:
        raise PolicyError(f"{name} must be at least {minimum}, not {value}")


@dataclass(frozen=True)
class SandboxPolicy:
    """What one sandbox may see and use. Frozen and validated at construction.

    Limits set to ``None`` are off (an explicit choice). ``memory_bytes`` and ``pids`` are
    enforced by a cgroup of the sandbox's own; a launch on a machine without the needed
    controller fails with `SandboxUnavailable` rather than running unlimited, unless
    ``limits="per-process"`` accepts weaker limits there (``RLIMIT_AS`` per process for
    memory, the uid's ``RLIMIT_NPROC`` for processes: `sandbox.limits` says what that
    gives up, and so does every result, in ``Termination.weakened``). Where a cgroup can
    be had it is used either way.

    ``network``: False (loopback only), True (the host's network namespace), or a list of
    ``HOST[:PORT]`` patterns (or a `NetworkAllowlist`): loopback only, and the host's
    proxy, offered on a loopback port, reaches what the patterns allow.
    """

    network: bool | NetworkAllowlist | Sequence[str] = False
    env: Mapping[str, str] = field(default_factory=lambda: DEFAULT_ENV)
    binds: tuple[Bind, ...] = ()
    tmpfs_bytes: int = 64 * MiB
    memory_bytes: int | None = 512 * MiB
    pids: int | None = 128
    cpu_seconds: int | None = None
    open_files: int = 256
    file_size_bytes: int | None = 64 * MiB
    address_space_bytes: int | None = None
    hostname: str = "sandbox"
    seccomp: SeccompProfile = "default"
    sandbox_uid: int | None = None
    limits: LimitsMode = "cgroup"

    def __post_init__(self) -> None:
        if not isinstance(self.network, bool):
            object.__setattr__(self, "network", _allowlist(self.network))
        env = dict(self.env)
        for key, value in env.items():
            if not isinstance(key, str) or not _ENV_KEY.match(key):
                raise PolicyError(f"environment name {key!r} is not a valid variable name")
            if not isinstance(value, str) or "\0" in value:
                raise PolicyError(f"environment value of {key} must be a string without NUL")
        object.__setattr__(self, "env", MappingProxyType(env))
        binds = tuple(self.binds)
        for bind in binds:
            if not isinstance(bind, Bind):
                raise PolicyError(f"binds must be Bind objects, not {bind!r}")
        dests = [b.dest for b in binds]
        if len(set(dests)) != len(dests):
            raise PolicyError(f"two binds share a destination: {sorted(dests)}")
        object.__setattr__(self, "binds", binds)
        _positive("tmpfs_bytes", self.tmpfs_bytes, 1 * MiB, allow_none=False)
        _positive("memory_bytes", self.memory_bytes, 16 * MiB)
        _positive("pids", self.pids, 4)
        _positive("cpu_seconds", self.cpu_seconds, 1)
        _positive("open_files", self.open_files, 16, allow_none=False)
        _positive("file_size_bytes", self.file_size_bytes, 1)
        _positive("address_space_bytes", self.address_space_bytes, 64 * MiB)
        if not isinstance(self.hostname, str) or not _HOSTNAME.match(self.hostname):
            raise PolicyError(f"hostname {self.hostname!r} is not a valid host name")
        if self.seccomp != "default":
            raise PolicyError(
                f"seccomp profile {self.seccomp!r} is unknown; the only profile is 'default' "
                "(seccomp cannot be turned off)"
            )
        if self.limits not in ("cgroup", "per-process"):
            raise PolicyError(
                f"limits {self.limits!r} is unknown: 'cgroup' (the default) or 'per-process'"
            )
        if self.sandbox_uid is not None:
            _positive("sandbox_uid", self.sandbox_uid, 1)
            if self.sandbox_uid in _FORBIDDEN_UIDS or self.sandbox_uid >= 2**32 - 1:
                raise PolicyError(f"sandbox_uid {self.sandbox_uid} is not allowed")

    @property
    def allowlist(self) -> NetworkAllowlist | None:
        """The network allowlist (reached through the host's proxy), if the policy has one."""
        return None if isinstance(self.network, bool) else self.network  # type: ignore[return-value]

    def replace(self, **changes: object) -> SandboxPolicy:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def needs_cgroup_memory(self) -> bool:
        return self.memory_bytes is not None

    @property
    def needs_cgroup_pids(self) -> bool:
        return self.pids is not None
