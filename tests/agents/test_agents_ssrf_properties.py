"""Properties of the address policy: every encoding of a refused IPv4 address is refused too."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.agents.errors import SSRFBlockedError
from switchyard.agents.tools.ssrf import SSRFGuard, StaticResolver, address_block_reason, parse_legacy_ipv4

REFUSED_V4 = [
    ipaddress.IPv4Network(n)
    for n in ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12")
] + [ipaddress.IPv4Network(n) for n in ("192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "198.18.0.0/15")]


@st.composite
def refused_v4(draw: st.DrawFn) -> ipaddress.IPv4Address:
    net = draw(st.sampled_from(REFUSED_V4))
    offset = draw(st.integers(min_value=0, max_value=net.num_addresses - 1))
    return net[offset]


def _embeddings(v4: ipaddress.IPv4Address) -> list[str]:
    n = int(v4)
    return [
        str(v4),
        f"::ffff:{v4}",
        str(ipaddress.IPv6Address((0xFFFF << 32) | n)),
        str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80))),
        str(ipaddress.IPv6Address((0x0064FF9B << 96) | n)),
        # IPv4-translated (SIIT, ::ffff:0:0:0/96), written both ways
        f"::ffff:0:{v4}",
        str(ipaddress.IPv6Address((0xFFFF << 48) | n)),
        # local-use NAT64 (64:ff9b:1::/48)
        str(ipaddress.IPv6Address((0x0064FF9B0001 << 80) | n)),
        # Teredo: the address as the server field, and obfuscated as the client field
        str(ipaddress.IPv6Address((0x20010000 << 96) | (n << 64) | (n ^ 0xFFFFFFFF))),
        # IPv4-compatible (deprecated ::/96) and the rest of ::/8
        f"::{v4}",
        str(ipaddress.IPv6Address((1 << 32) | n)),
    ]


@settings(max_examples=300, deadline=None)
@given(refused_v4())
def test_every_embedding_of_a_refused_v4_address_is_refused(v4: ipaddress.IPv4Address) -> None:
    for text in _embeddings(v4):
        assert address_block_reason(text) is not None, text


@settings(max_examples=300, deadline=None)
@given(refused_v4(), st.sampled_from(["dec", "hex", "oct", "short"]))
def test_numeric_spellings_are_understood_and_refused(v4: ipaddress.IPv4Address, style: str) -> None:
    n = int(v4)
    a, b, c, d = v4.packed
    host = {
        "dec": str(n),
        "hex": hex(n),
        "oct": "0" + format(n, "o"),
        "short": f"{a}.{(b << 16) | (c << 8) | d}",
    }[style]
    assert parse_legacy_ipv4(host) == v4
    guard = SSRFGuard(resolver=StaticResolver({}))
    with pytest.raises(SSRFBlockedError):
        guard.check_url(f"http://{host}/")


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_policy_agrees_with_the_standard_library_on_global_addresses(n: int) -> None:
    v4 = ipaddress.IPv4Address(n)
    if address_block_reason(v4) is None:
        assert v4.is_global
        assert address_block_reason(f"::ffff:{v4}") is None
    # IPv4-translated addresses are never a destination, whatever they embed (Python calls them global)
    assert address_block_reason(f"::ffff:0:{v4}") == "IPv4-translated address"
