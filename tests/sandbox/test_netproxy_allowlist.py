"""Allowlist patterns: parsing, what each form matches, and the literal-address rule."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import PolicyError
from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy.allowlist import Allowlist, PatternError, Rule, normalise_name


@pytest.mark.parametrize(
    ("pattern", "host", "port", "port_"),
    [
        ("api.example.com", "api.example.com", None, None),
        ("API.Example.COM.:443", "api.example.com", 443, 443),
        ("*.example.com:*", "*.example.com", None, None),
        ("10.0.0.5:8080", "10.0.0.5", 8080, 8080),
        ("[fd00::1]:443", "fd00::1", 443, 443),
        ("[::1]", "::1", None, None),
        ("*", "*", None, None),
        ("*:443", "*", 443, 443),
    ],
)
def test_patterns_parse(pattern: str, host: str, port: int | None, port_: int | None) -> None:
    rule = Rule.parse(pattern)
    assert (rule.host, rule.port) == (host, port_)
    assert Rule.parse(str(rule)) == rule  # str() round-trips


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("", "HOST or HOST:PORT"),
        ("api.example.com:0", "1..65535"),
        ("api.example.com:70000", "1..65535"),
        ("api.example.com:http", "1..65535"),
        ("fd00::1", "brackets"),
        ("[api.example.com]:80", "only IPv6"),
        ("[fd00::1", "without ']'"),
        ("bad_host!:80", "not a host name"),
        ("a..b", "not a host name"),
        ("-a.com", "not a host name"),
        ("*example.com", "not a host name"),
        ("a.*.com", "not a host name"),
        ("bücher.de", "punycode"),
    ],
)
def test_bad_patterns_say_what_is_wrong(pattern: str, words: str) -> None:
    with pytest.raises(PatternError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Rule.parse(pattern)


def test_matching() -> None:
    allow = Allowlist.parse(["api.example.com:443", "*.cdn.example:*", "10.0.0.5:8080", "*:22"])
    assert allow.match("api.example.com", 443) is not None
    assert allow.match("api.example.com", 80) is None
    assert allow.match("x.api.example.com", 443) is None  # exact means exact
    assert allow.match("a.cdn.example", 1) is not None
    assert allow.match("a.b.cdn.example", 65535) is not None
    assert allow.match("cdn.example", 443) is None  # the wildcard is for names below it
    assert allow.match("evilcdn.example", 443) is None
    assert allow.match("10.0.0.5", 8080) is not None
    assert allow.match("10.0.0.5", 8081) is None
    assert allow.match("anything.at.all", 22) is not None


def test_only_a_literal_rule_names_an_address() -> None:
    allow = Allowlist.parse(["*", "10.0.0.5:8080", "[fd00::1]"])
    assert allow.names_address(ipaddress.ip_address("10.0.0.5"), 8080)
    assert not allow.names_address(ipaddress.ip_address("10.0.0.5"), 8081)
    assert allow.names_address(ipaddress.ip_address("fd00::1"), 1)
    assert not allow.names_address(ipaddress.ip_address("127.0.0.1"), 80)  # '*' names nothing


def test_network_allowlist_validates_and_normalises() -> None:
    net = NetworkAllowlist(["API.example.com:443", "api.example.com:443", "*.x.org"])
    assert net.allow == ("api.example.com:443", "*.x.org")
    with pytest.raises(PolicyError, match=r"not one string|list of HOST"):
        NetworkAllowlist("api.example.com")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="empty"):
        NetworkAllowlist([])
    with pytest.raises(PolicyError, match="max_bytes must be an int >= 1"):
        NetworkAllowlist(["a.com"], max_bytes=0)
    with pytest.raises(PolicyError, match="network allowlist: 'a b': "):
        NetworkAllowlist(["a b"])
    pinned = NetworkAllowlist(["web.test"], hosts={"Web.Test": "127.0.0.1"})
    assert dict(pinned.hosts) == {"web.test": "127.0.0.1"}
    with pytest.raises(PolicyError, match="not an IP address"):
        NetworkAllowlist(["web.test"], hosts={"web.test": "localhost"})
    with pytest.raises(PolicyError, match="not a host name"):
        NetworkAllowlist(["web.test"], hosts={"10.0.0.1": "10.0.0.2"})


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
_name = st.lists(_label, min_size=1, max_size=4).map(".".join)


@given(_name, _name, st.integers(1, 65535))
def test_wildcards_match_exactly_the_names_below(domain: str, sub: str, port: int) -> None:
    rule = Rule.parse(f"*.{domain}")
    assert rule.matches(f"{sub}.{domain}", port)
    assert not rule.matches(domain, port)
    glued = sub + domain  # "evil" + "example.com": not below the domain
    assert rule.matches(glued, port) == glued.endswith("." + domain)


@given(_name)
def test_names_normalise_idempotently(name: str) -> None:
    once = normalise_name(name.upper() + ".")
    assert once == name
    assert normalise_name(once) == once
