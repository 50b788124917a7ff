"""Network allowlist patterns: which ``host:port`` a sandbox may reach through the proxy.

A pattern is ``HOST``, ``HOST:PORT`` or ``HOST:*``, where HOST is an exact name
(``api.example.com``), a wildcard for the names below a domain (``*.example.com``: not
``example.com`` itself), an IP address (``10.0.0.5``, ``[fd00::1]``), or ``*`` (any host).
No port, or ``*``, means any port. Names are compared case-insensitively, without a
trailing dot. Pure: no I/O, no resolution; which *addresses* a name may end at is
`sandbox.netproxy.addresses`' and `sandbox.netproxy.gate`'s business.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")


class PatternError(ValueError):
    """A pattern that is not ``HOST[:PORT]``; the message says what is wrong."""


def normalise_name(host: str) -> str | None:
    """A DNS name lower-cased without its trailing dot, or None if it is not one
    (ASCII letters, digits, ``-`` and ``_`` in dot-separated labels of 1-63)."""
    name = host.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253 or not name.isascii():
        return None
    if not all(_LABEL.match(label) for label in name.split(".")):
        return None
    return name


def parse_address(host: str) -> IPAddress | None:
    """An IP address written the standard way (``1.2.3.4``, ``::1``, no brackets, no
    zone), else None. ``127.1`` and ``0x7f.0.0.1`` are not addresses here: they are names,
    which the proxy resolves and then checks like any other answer."""
    if ":" not in host and not host[-1:].isdigit():
        return None  # a name (an IPv4 address ends in a digit): no parse, no exceptions
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def split_host_port(text: str) -> tuple[str, str | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` -> (host, port text or None)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise PatternError(f"{text!r}: '[' without ']'")
        host, rest = text[1:end], text[end + 1 :]
        if ":" not in host:
            raise PatternError(f"{text!r}: only IPv6 addresses go in brackets")
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise PatternError(f"{text!r}: expected ':PORT' after ']'")
        return host, rest[1:]
    if text.count(":") > 1:
        raise PatternError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:443")
    host, colon, port = text.partition(":")
    return host, (port if colon else None)


def parse_port(text: str, where: str) -> int:
    if not _PORT.match(text) or not 1 <= int(text) <= 65535:
        raise PatternError(f"{where}: port {text!r} is not a number in 1..65535")
    return int(text)


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed pattern. ``host``: a name, ``*.`` + a domain, an address text, or ``*``;
    ``port``: None for any."""

    host: str
    port: int | None
    address: IPAddress | None = None

    @classmethod
    def parse(cls, pattern: str) -> Rule:
        if not isinstance(pattern, str) or not pattern.strip():
            raise PatternError(f"{pattern!r}: expected HOST or HOST:PORT")
        text = pattern.strip()
        host_text, port_text = split_host_port(text)
        port = None
        if port_text is not None and port_text != "*":
            port = parse_port(port_text, repr(pattern))
        if host_text == "*":
            return cls("*", port)
        address = parse_address(host_text)
        if address is not None:
            if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
                raise PatternError(f"{pattern!r}: zoned addresses are not supported")
            return cls(str(address), port, address)
        if ":" in host_text:
            raise PatternError(f"{pattern!r}: {host_text!r} is not an IPv6 address")
        wildcard = host_text.startswith("*.")
        name = normalise_name(host_text[2:] if wildcard else host_text)
        if name is None or "*" in host_text[2 if wildcard else 0 :]:
            hint = " (use the punycode form, xn--...)" if not host_text.isascii() else ""
            raise PatternError(
                f"{pattern!r}: {host_text!r} is not a host name, '*.domain', an IP address "
                f"or '*'{hint}"
            )
        return cls(f"*.{name}" if wildcard else name, port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def matches(self, host: str, port: int) -> bool:
        """``host`` as `normalise_name` or an address's text gives it."""
        if self.port is not None and port != self.port:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


@dataclass(frozen=True, slots=True)
class Allowlist:
    """The rules of one sandbox, in the order given (the first match is reported)."""

    rules: tuple[Rule, ...]

    @classmethod
    def parse(cls, patterns: Iterable[str]) -> Allowlist:
        if isinstance(patterns, str):
            raise PatternError("expected a list of HOST[:PORT] patterns, not one string")
        rules: list[Rule] = []
        for pattern in patterns:
            rule = Rule.parse(pattern)
            if rule not in rules:
                rules.append(rule)
        return cls(tuple(rules))

    def __str__(self) -> str:
        return ", ".join(str(rule) for rule in self.rules) or "(nothing)"

    def match(self, host: str, port: int) -> Rule | None:
        """The first rule that lets ``host:port`` through, or None."""
        for rule in self.rules:
            if rule.matches(host, port):
                return rule
        return None

    def names_address(self, address: IPAddress, port: int) -> bool:
        """Whether a rule names ``address`` literally (with a matching port): only then
        may the proxy connect to a loopback, private or otherwise internal address."""
        for rule in self.rules:
            if rule.address == address and (rule.port is None or rule.port == port):
                return True
        return False
