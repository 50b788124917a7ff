"""`NetworkAllowlist`: ``SandboxPolicy(network=...)`` between off and the host's network.

The sandbox keeps no interface but loopback. What it may reach goes through the host's
proxy (`sandbox.netproxy.server`), which lets a connection through only to a ``host:port``
the patterns allow (`sandbox.netproxy.allowlist`), never to an internal address a name
resolves to, and within the per-call caps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .allowlist import Allowlist, IPAddress, PatternError, normalise_name, parse_address
from .gate import Caps, Gate

MiB = 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_BYTES = 64 * MiB


@dataclass(frozen=True)
class NetworkAllowlist:
    """Reach only ``allow`` (``HOST[:PORT]`` patterns: exact names, ``*.domain``, IP
    addresses, ``*``; no port or ``*`` for any), through the host's proxy.

    ``max_connections`` and ``max_bytes`` (both directions together) are per call: per
    supervised tool call, or per run for `sandvisor exec`. None: no cap.

    ``hosts`` pins names to addresses (``{"api.internal": "10.0.0.5"}``, like curl's
    ``--resolve``): the proxy uses the address without asking DNS, and, since the policy
    names it, even an internal one. A pinned name must still be allowed by a pattern.
    """

    allow: tuple[str, ...]
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS
    max_bytes: int | None = DEFAULT_MAX_BYTES
    hosts: Mapping[str, str] = field(default_factory=dict)
    allowlist: Allowlist = field(init=False, repr=False, compare=False)
    pins: Mapping[str, IPAddress] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from ..errors import PolicyError

        if isinstance(self.allow, str) or not isinstance(self.allow, Iterable):
            raise PolicyError(
                f"network allowlist must be a list of HOST[:PORT] patterns, not {self.allow!r}"
            )
        allow = tuple(self.allow)
        try:
            allowlist = Allowlist.parse(allow)
        except PatternError as exc:
            raise PolicyError(f"network allowlist: {exc}") from None
        if not allowlist.rules:
            raise PolicyError(
                "network allowlist is empty: give at least one HOST[:PORT], or network=False"
            )
        for name in ("max_connections", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise PolicyError(f"network {name} must be an int >= 1 or None, not {value!r}")
        pins: dict[str, IPAddress] = {}
        for name, text in dict(self.hosts).items():
            key = normalise_name(name) if isinstance(name, str) else None
            address = parse_address(text) if isinstance(text, str) else None
            if key is None or parse_address(name) is not None:
                raise PolicyError(f"network hosts: {name!r} is not a host name")
            if address is None:
                raise PolicyError(f"network hosts: {name} = {text!r} is not an IP address")
            pins[key] = address
        object.__setattr__(self, "allow", tuple(str(rule) for rule in allowlist.rules))
        object.__setattr__(self, "hosts", MappingProxyType({k: str(v) for k, v in pins.items()}))
        object.__setattr__(self, "allowlist", allowlist)
        object.__setattr__(self, "pins", MappingProxyType(pins))

    @property
    def caps(self) -> Caps:
        return Caps(self.max_connections, self.max_bytes)

    @property
    def gate(self) -> Gate:
        return Gate(self.allowlist, self.pins)
