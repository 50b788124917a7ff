"""The filesystem a sandbox sees, apart from its policy's binds.

The system runtime read-only (``/usr``, and ``/bin``, ``/lib``... recreated as the symlinks
they are on merged-/usr systems, or bound where they are real directories), the few files
of ``/etc`` that programs need to start (the dynamic linker cache, ``alternatives``, the
time zone), and with the network also the resolver and CA certificates. Nothing else of
``/etc``: ``passwd``, ``group`` and ``hosts`` are written fresh for the sandbox.
"""

from __future__ import annotations

import os
from functools import cache

from .bwrap import INSIDE_GID, INSIDE_UID, MountOp, RoBind, Symlink

SYSTEM_DIRS = ("/usr",)
TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALWAYS = (
    "/etc/ld.so.cache",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)
ETC_NETWORK = (
    "/etc/resolv.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
)


def _etc_entry(path: str) -> MountOp | None:
    """A bind of an /etc entry, or the symlink it is when it points into /usr."""
    if not os.path.lexists(path):
        return None
    if os.path.islink(path):
        target = os.readlink(path)
        resolved = os.path.realpath(path)
        if resolved.startswith("/usr/") and os.path.exists(resolved):
            return Symlink(target if target.startswith("/") else resolved, path)
        if not os.path.exists(resolved):
            return None
        return RoBind(resolved, path)
    return RoBind(path, path)


@cache
def system_mounts(network: bool) -> tuple[MountOp, ...]:
    """The read-only system runtime for this machine (cached: it does not change)."""
    ops: list[MountOp] = [RoBind(d, d) for d in SYSTEM_DIRS if os.path.isdir(d)]
    for path in TOP_LEVEL_LINKS:
        if os.path.islink(path):
            ops.append(Symlink(os.readlink(path), path))
        elif os.path.isdir(path):
            ops.append(RoBind(path, path))
    for path in ETC_ALWAYS + (ETC_NETWORK if network else ()):
        op = _etc_entry(path)
        if op is not None:
            ops.append(op)
    return tuple(ops)


def synthetic_etc(hostname: str) -> dict[str, str]:
    """``/etc`` files written for the sandbox instead of the host's: name -> content."""
    return {
        "/etc/passwd": (
            "root:x:0:0:root:/:/usr/sbin/nologin\n"
            f"sandbox:x:{INSIDE_UID}:{INSIDE_GID}:sandbox:/tmp:/usr/sbin/nologin\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "/etc/group": f"root:x:0:\nsandbox:x:{INSIDE_GID}:\nnogroup:x:65534:\n",
        "/etc/hosts": f"127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost\n",
        "/etc/hostname": f"{hostname}\n",
    }
