"""Which addresses the proxy refuses unless an allowlist entry names them literally.

A DNS answer is not trusted: ``api.example.com`` may resolve to ``127.0.0.1``, to the
cloud's metadata service, or to a host of the private network the proxy runs in. Every
address the proxy would connect to is classified here first; anything but a public
unicast address gets a reason. IPv6 forms that embed an IPv4 address (IPv4-mapped,
NAT64, 6to4) are judged by the address they embed. Pure, table-driven.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Reason = Literal[
    "metadata",
    "loopback",
    "unspecified",
    "private",
    "link_local",
    "cgnat",
    "multicast",
    "reserved",
]

#: Cloud metadata and host-agent endpoints (checked first: some sit in public space).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a public address, reachable only inside Azure)
        "fd00:ec2::254",  # AWS IPv6
        "fd00:ec2::23",  # AWS IPv6 DNS
    )
)

_V4: tuple[tuple[str, Reason], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("169.254.0.0/16", "link_local"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_V6: tuple[tuple[str, Reason], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "reserved"),  # IPv4-compatible (deprecated)
    ("64:ff9b:1::/48", "private"),  # local-use NAT64
    ("100::/64", "reserved"),  # discard
    ("2001::/32", "reserved"),  # Teredo: the IPv4 endpoint is obfuscated
    ("2001:db8::/32", "reserved"),
    ("fc00::/7", "private"),  # unique local, fd00::/8 included
    ("fe80::/10", "link_local"),
    ("fec0::/10", "private"),  # site-local (deprecated)
    ("ff00::/8", "multicast"),
)
_V4_NETS = tuple((ipaddress.IPv4Network(net), why) for net, why in _V4)
_V6_NETS = tuple((ipaddress.IPv6Network(net), why) for net, why in _V6)
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 or 6to4 address leads to, else None."""
    if address in _MAPPED or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    return None


def classify(address: IPAddress) -> Reason | None:
    """None for a public unicast address, else why the proxy refuses it."""
    if address in METADATA:
        return "metadata"
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "link_local"
        inner = embedded_ipv4(address)
        if inner is not None:
            return classify(inner)
        nets: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, Reason], ...] = _V6_NETS
    else:
        nets = _V4_NETS
    for net, why in nets:
        if address in net:
            return why
    if not address.is_global:  # whatever IANA's registry marks special-purpose besides
        return "reserved"
    return None
