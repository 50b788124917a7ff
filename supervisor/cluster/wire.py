"""What the caller and a node's actor pass each other, as msgspec Structs.

A deadline crosses the cluster as a wall-clock instant (``time.time()`` at the caller plus
the seconds given), so time spent queued in Ray counts against it; nodes keep their clocks
in step (NTP), as a wall-clock deadline needs.

Calls cross Ray as plain rows (`to_row`): Ray carries lists of plain values with its own
msgpack, exactly (what msgpack cannot carry as it is, Ray pickles, value by value), where
a Struct would be pickled whole, at several times the cost. Outcomes come back as one
msgspec msgpack blob per call or batch (`pack_outcomes`): a hundredth of pickling's cost.
"""

from __future__ import annotations

import math
import time
from typing import Any

import msgspec

from sandbox import SandboxPolicy
from supervisor.workers.outcome import Outcome


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


#: A `CallRequest` as it crosses Ray: its fields in order, in a list.
Row = list[Any]


def to_row(request: CallRequest) -> Row:
    return [
        request.call_id, request.tool, request.value, request.deadline_at,
        request.idempotency_key,
    ]  # fmt: skip


def from_row(row: Row) -> CallRequest:
    call_id, tool, value, at, key = row
    return CallRequest(call_id=call_id, tool=tool, value=value, deadline_at=at, idempotency_key=key)


_encode_outcomes = msgspec.msgpack.Encoder().encode
_decode_outcomes = msgspec.msgpack.Decoder(list[Outcome]).decode


def pack_outcomes(results: list[Outcome | BaseException]) -> bytes | list[Outcome | BaseException]:
    """A node's results as one msgpack blob; as they are (Ray pickles them) when one is a
    refusal, or holds what msgpack cannot carry exactly (an int past 64 bits, a lone
    surrogate). Results are JSON values, which msgpack carries exactly."""
    if not all(type(r) is Outcome for r in results):
        return results
    try:
        return _encode_outcomes(results)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return results


def unpack_outcomes(packed: bytes | list[Outcome | BaseException]) -> list[Outcome | BaseException]:
    if isinstance(packed, bytes):
        return list(_decode_outcomes(packed))
    return packed


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
    niceness: int | None  # the actors' nice value, set at start; None: Ray's


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
    niceness: int  # the nice value the actor and its sandboxes run at

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
