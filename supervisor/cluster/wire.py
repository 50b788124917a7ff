"""What the caller and a node's actor pass each other, as msgspec Structs.

A deadline crosses the cluster as a wall-clock instant (``time.time()`` at the caller plus
the seconds given), so time spent queued in Ray counts against it; nodes keep their clocks
in step (NTP), as a wall-clock deadline needs.
"""

from __future__ import annotations

import math
import time
from typing import Any

import msgspec

from sandbox import SandboxPolicy


class Call(msgspec.Struct, frozen=True, kw_only=True):
    """One call of a batch (`RaySupervisor.invoke_many`): the arguments of ``invoke``
    without ``on_chunk`` (a batch returns its outcomes; stream with ``invoke``)."""

    tool: str
    value: Any
    deadline: float | None = None
    idempotency_key: str | None = None


class CallRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A call as a node receives it. ``call_id`` names it for a cancel; ``deadline_at``
    is the caller's wall clock; the key is the caller's or one made for the call, so its
    outcome can be asked for later by key."""

    call_id: str
    tool: str
    value: Any
    deadline_at: float | None
    idempotency_key: str


class NodeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What every node's supervisor is started with (`AsyncioSupervisor` arguments, less
    the ledger path, which is the node's own)."""

    adapters: list[str]
    policy: SandboxPolicy
    pool_size: int
    options: dict[str, Any]
    ledger_dir: str | None
    durable: bool
    name: str


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A started node actor: where it runs, what it serves, what its start found."""

    node_id: str
    hostname: str
    ip: str
    pid: int
    ledger_path: str
    tools: list[str]
    recovered: int  # operations its durable ledger still held in flight
    swept: list[str]  # cgroups of dead hosts removed at start

    @property
    def label(self) -> str:
        return f"{self.hostname} ({self.ip}, Ray node {self.node_id[:12]})"


def deadline_at(deadline: float | None) -> float | None:
    """The caller's wall-clock instant for ``deadline`` seconds from now."""
    if deadline is None:
        return None
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        raise ValueError(f"deadline must be a number of seconds, not {deadline!r}")
    if not 0 < deadline < math.inf:
        raise ValueError("deadline must be a positive, finite number of seconds")
    return time.time() + deadline
