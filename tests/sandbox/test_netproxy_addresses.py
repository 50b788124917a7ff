"""Address classes: what the proxy never connects to unless a rule names it literally."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.netproxy.addresses import classify, embedded_ipv4


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("168.63.129.16", "metadata"),  # public space, still refused
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("fc00::1", "private"),
        ("100.64.0.1", "cgnat"),
        ("169.254.1.1", "link_local"),
        ("fe80::1", "link_local"),
        ("fe80::1%2", "link_local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "reserved"),
        ("2001:db8::1", "reserved"),
        # IPv6 forms that lead to an IPv4 address are judged by it
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2002:7f00:0001::1", "loopback"),
        ("2002:a9fe:a9fe::1", "metadata"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),  # Teredo
        ("::127.0.0.1", "reserved"),  # IPv4-compatible
    ],
)
def test_internal_addresses_are_refused_with_their_reason(address: str, reason: str) -> None:
    assert classify(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["1.1.1.1", "93.184.216.34", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_pass(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


def test_embedded_ipv4() -> None:
    assert embedded_ipv4(ipaddress.IPv6Address("::ffff:1.2.3.4")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::102:304")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("2002:102:304::")) == ipaddress.IPv4Address(
        "1.2.3.4"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) is None


@given(st.integers(0, 2**32 - 1))
def test_every_ipv4_address_mapped_to_ipv6_is_judged_the_same(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    assert classify(ipaddress.IPv6Address(f"::ffff:{v4}")) == classify(v4)


@given(st.integers(0, 2**32 - 1))
def test_nothing_python_calls_non_global_passes(value: int) -> None:
    address = ipaddress.IPv4Address(value)
    if not address.is_global:
        assert classify(address) is not None
