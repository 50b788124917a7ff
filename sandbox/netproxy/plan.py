"""What a sandbox with a network allowlist needs of its command: the endpoint's directory
bound at `SANDBOX_DIR`, ``$SANDVISOR_NET_SOCKET`` naming the socket in it, and the
loopback forwarder (``worker_runtime.netforward``) started before the program.

A worker starts the forwarder itself (``forwards_itself``: no second interpreter); any
other program is wrapped: ``python -I -S .../netforward.py -- PROGRAM ARGS`` starts the
relay and execs the program, which keeps its process and exit status. Pure: it only
computes the `Command`.
"""

from __future__ import annotations

from dataclasses import replace

from ..command import Command
from ..policy import Bind
from ..pyworker import SITE, python_command

SANDBOX_DIR = "/run/sandvisor/net"
SANDBOX_SOCKET = SANDBOX_DIR + "/proxy.sock"
ENV_SOCKET = "SANDVISOR_NET_SOCKET"  # worker_runtime.netforward.ENV_SOCKET
FORWARDER = f"{SITE}/worker_runtime/netforward.py"


def with_forwarder(command: Command, directory: str, *, forwards_itself: bool) -> Command:
    """``command`` as it runs in a sandbox whose proxy endpoint is ``directory``."""
    binds: dict[str, Bind] = {bind.dest: bind for bind in command.binds}
    argv = command.argv
    masks = command.masks
    if not forwards_itself:
        python = python_command("worker_runtime.netforward")
        for bind in python.binds:
            known = binds.setdefault(bind.dest, bind)
            if known.source != bind.source:
                raise ValueError(
                    f"{bind.dest} is bound from {known.source}, but the network forwarder "
                    f"needs it from {bind.source}"
                )
        argv = (python.argv[0], "-I", "-S", FORWARDER, "--", *argv)
        masks = tuple(dict.fromkeys((*masks, *python.masks)))
    binds[SANDBOX_DIR] = Bind(directory, SANDBOX_DIR)
    return replace(
        command,
        argv=argv,
        binds=tuple(binds.values()),
        env={**command.env, ENV_SOCKET: SANDBOX_SOCKET},
        masks=masks,
    )
