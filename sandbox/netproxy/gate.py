"""The proxy's decisions, without I/O: may this target be reached, at which addresses, and
within which per-call caps.

`Gate.target` judges what the client asked for (the allowlist, and an IP literal's
class); `Gate.addresses` judges what a name resolved to: only public unicast addresses
are kept, unless a rule names an address literally. A name never makes an internal
address reachable, whatever DNS answers. `CallMeter` counts one call's connections and
bytes against its caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .addresses import classify
from .allowlist import Allowlist, IPAddress, normalise_name, parse_address


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Resolve:
    """Allowed by name: resolve ``name`` (the proxy resolves; never the sandbox)."""

    name: str


@dataclass(frozen=True, slots=True)
class Connect:
    """Connect to these addresses, in order, until one answers."""

    addresses: tuple[IPAddress, ...]


@dataclass(frozen=True, slots=True)
class Gate:
    """``pins``: names answered without DNS (their addresses were chosen by whoever wrote
    the policy, so they count as named literally, whatever their class)."""

    allowlist: Allowlist
    pins: Mapping[str, IPAddress] = field(default_factory=dict)

    def target(self, host: str, port: int) -> Refused | Resolve | Connect:
        """The first judgement, on what the client wrote."""
        address = parse_address(host)
        name = str(address) if address is not None else normalise_name(host)
        shown = f"{host}:{port}"
        if name is None:
            return Refused("bad_request", f"{host!r} is not a host name or an IP address")
        if not 1 <= port <= 65535:
            return Refused("bad_request", f"port {port} is not in 1..65535")
        if self.allowlist.match(name, port) is None:
            return Refused("not_allowed", f"{shown} is not in the allowlist ({self.allowlist})")
        if address is None:
            pinned = self.pins.get(name)
            return Resolve(name) if pinned is None else Connect((pinned,))
        why = classify(address)
        if why is not None and not self.allowlist.names_address(address, port):
            return Refused(
                why, f"{shown} is {_article(why)} address; only a rule naming it allows it"
            )
        return Connect((address,))

    def addresses(self, name: str, port: int, found: Sequence[IPAddress]) -> Refused | Connect:
        """The second, on what ``name`` resolved to: the addresses that may be used."""
        kept: list[IPAddress] = []
        first_refusal: tuple[IPAddress, str] | None = None
        for address in found:
            why = classify(address)
            if why is None or self.allowlist.names_address(address, port):
                if address not in kept:
                    kept.append(address)
            elif first_refusal is None:
                first_refusal = (address, str(why))
        if kept:
            return Connect(tuple(kept))
        if first_refusal is None:
            return Refused("dns_failed", f"{name} has no address")
        address, reason = first_refusal
        return Refused(
            reason, f"{name} resolves to {address}, {_article(reason)} address (never for a name)"
        )


def _article(reason: str) -> str:
    words = {
        "metadata": "a cloud metadata",
        "loopback": "a loopback",
        "unspecified": "an unspecified",
        "private": "a private",
        "link_local": "a link-local",
        "cgnat": "a shared (CGNAT)",
        "multicast": "a multicast",
        "reserved": "a reserved",
    }
    return words.get(reason, "a refused")


@dataclass(frozen=True, slots=True)
class Caps:
    """Per call: connections opened, and bytes moved both ways. None: no cap."""

    max_connections: int | None = 64
    max_bytes: int | None = 64 * 1024 * 1024


class CallMeter:
    """One call's use of the network, against its `Caps`."""

    __slots__ = ("bytes", "caps", "connections")

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.connections = 0
        self.bytes = 0

    def admit(self) -> Refused | None:
        """Whether one more connection is within the caps (counted by `opened`)."""
        caps = self.caps
        if caps.max_connections is not None and self.connections >= caps.max_connections:
            return Refused(
                "connection_cap", f"the call opened {self.connections} connections, its limit"
            )
        if caps.max_bytes is not None and self.bytes >= caps.max_bytes:
            return Refused("byte_cap", f"the call moved {self.bytes} bytes, its limit")
        return None

    def opened(self) -> None:
        self.connections += 1

    def charge(self, size: int) -> bool:
        """Count ``size`` bytes; False once the call is past its byte cap."""
        self.bytes += size
        return self.caps.max_bytes is None or self.bytes <= self.caps.max_bytes
