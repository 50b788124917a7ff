"""The proxy's decisions: the allowlist first, then what the target or its name's answer
is; internal addresses only when a rule or a pin names them; per-call caps."""

from __future__ import annotations

import ipaddress

from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy.gate import CallMeter, Caps, Connect, Refused, Resolve

ip = ipaddress.ip_address


def gate(*allow: str, **pins: str):  # type: ignore[no-untyped-def]
    return NetworkAllowlist(allow, hosts={k.replace("_", "."): v for k, v in pins.items()}).gate


def test_names_resolve_only_when_allowed() -> None:
    g = gate("api.example.com:443")
    assert g.target("API.example.com.", 443) == Resolve("api.example.com")
    refused = g.target("api.example.com", 80)
    assert isinstance(refused, Refused) and refused.reason == "not_allowed"
    assert "api.example.com:80 is not in the allowlist (api.example.com:443)" in refused.detail
    assert g.target("bad name", 443) == Refused(
        "bad_request", "'bad name' is not a host name or an IP address"
    )


def test_addresses_written_by_the_client() -> None:
    g = gate("*")
    assert g.target("1.1.1.1", 443) == Connect((ip("1.1.1.1"),))
    for host, reason in [
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("fd00::1", "private"),
    ]:
        decision = g.target(host, 80)
        assert isinstance(decision, Refused) and decision.reason == reason, host


def test_a_literal_rule_allows_an_internal_address() -> None:
    g = gate("10.0.0.5:8080", "*")
    assert g.target("10.0.0.5", 8080) == Connect((ip("10.0.0.5"),))
    assert isinstance(g.target("10.0.0.5", 8081), Refused)  # '*' names no address


def test_dns_answers_keep_only_public_addresses() -> None:
    g = gate("*.example.com")
    mixed = [ip("10.0.0.1"), ip("93.184.216.34"), ip("::1"), ip("93.184.216.34")]
    assert g.addresses("a.example.com", 443, mixed) == Connect((ip("93.184.216.34"),))
    refused = g.addresses("a.example.com", 443, [ip("169.254.169.254"), ip("127.0.0.1")])
    assert isinstance(refused, Refused) and refused.reason == "metadata"
    assert "a.example.com resolves to 169.254.169.254" in refused.detail
    assert g.addresses("a.example.com", 443, []) == Refused(
        "dns_failed", "a.example.com has no address"
    )


def test_a_name_reaches_an_internal_address_only_if_a_rule_names_it() -> None:
    g = gate("internal.test:8080", "10.0.0.5:8080")
    assert g.addresses("internal.test", 8080, [ip("10.0.0.5")]) == Connect((ip("10.0.0.5"),))
    assert isinstance(g.addresses("internal.test", 8080, [ip("10.0.0.6")]), Refused)


def test_pins_skip_dns_and_count_as_named() -> None:
    g = gate("web.test:80", web_test="127.0.0.1")
    assert g.target("web.test", 80) == Connect((ip("127.0.0.1"),))
    assert isinstance(g.target("web.test", 81), Refused)  # still needs a pattern


def test_call_meter() -> None:
    meter = CallMeter(Caps(max_connections=2, max_bytes=100))
    for _ in range(2):
        assert meter.admit() is None
        meter.opened()
    refused = meter.admit()
    assert refused is not None and refused.reason == "connection_cap"
    fresh = CallMeter(Caps(max_connections=None, max_bytes=100))
    assert fresh.charge(100)
    assert not fresh.charge(1)
    refused = fresh.admit()
    assert refused is not None and refused.reason == "byte_cap"
    unlimited = CallMeter(Caps(None, None))
    assert unlimited.charge(10**12) and unlimited.admit() is None
