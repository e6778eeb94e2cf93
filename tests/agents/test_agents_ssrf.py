"""The SSRF guard against a corpus of hostile URLs, resolutions, rebinding and redirects (no outside traffic)."""

from __future__ import annotations

import httpx
import pytest

from switchyard.agents.errors import SSRFBlockedError, ToolExecutionError
from switchyard.agents.tools.fetch import FetchLimits, safe_fetch
from switchyard.agents.tools.ssrf import SSRFGuard, StaticResolver, address_block_reason, parse_legacy_ipv4

PUBLIC_V4 = "93.184.216.34"

# URLs refused on their face, before any lookup.
HOSTILE_URLS = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/admin",
    "http://127.255.255.254/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://foo.localhost/",
    "http://0.0.0.0/",
    "http://0/",
    "http://2130706433/",
    "http://017700000001/",
    "http://0x7f000001/",
    "http://0x7f.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://0177.0.0.1/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://100.100.100.200/latest/meta-data/",
    "http://168.63.129.16/machine",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/computeMetadata/v1/",
    "http://instance-data/latest/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://198.18.0.1/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::127.0.0.1]/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fc00::1]/",
    "http://[ff02::1]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
    "http://[::ffff:0:127.0.0.1]/",
    "http://[::ffff:0:7f00:1]/",
    "http://[::ffff:0:a9fe:a9fe]/",
    "http://[::ffff:0:8.8.8.8]/",
    "http://[64:ff9b:1::7f00:1]/",
    "http://[64:ff9b:1::808:808]/",
    "http://[::1:7f00:1]/",
    "http://user:pass@example.com/",
    "http://example.com@127.0.0.1/",
    "http://example.com\\@127.0.0.1/",
    "http://%31%32%37.0.0.1/",
    "http://exa mple.com/",
    "http://example.com\r\nHost: 127.0.0.1/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "ftp://example.com/",
    "dict://127.0.0.1:11211/stat",
    "ws://example.com/",
    "javascript:alert(1)",
    "http:///path-only",
    "http://intranet/",
    "http://printer.local/",
    "http://db.internal/",
    "http://1.2.3.4.5/",
    "http://example.com:0/",
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
async def test_hostile_url_is_refused_without_lookup(url: str) -> None:
    resolver = StaticResolver({})
    guard = SSRFGuard(resolver=resolver)
    with pytest.raises(SSRFBlockedError):
        guard.check_url(url)
    with pytest.raises(SSRFBlockedError):
        await safe_fetch(guard, "GET", url, inner_transport=_never_called())
    assert resolver.lookups == []


# Names that look harmless but resolve somewhere internal: refused at connect time.
HOSTILE_RESOLUTIONS = {
    "loopback.example.com": ["127.0.0.1"],
    "loopback6.example.com": ["::1"],
    "private.example.com": ["10.1.2.3"],
    "private172.example.com": ["172.20.0.5"],
    "private192.example.com": ["192.168.0.10"],
    "cgnat.example.com": ["100.127.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "metadata6.example.com": ["fd00:ec2::254"],
    "mapped.example.com": ["::ffff:10.0.0.1"],
    "sixtofour.example.com": ["2002:c0a8:0101::1"],
    "nat64.example.com": ["64:ff9b::0a00:0001"],
    "translated.example.com": ["::ffff:0:10.0.0.1"],
    "translated-loopback.example.com": ["::ffff:0:127.0.0.1"],
    "nat64-local.example.com": ["64:ff9b:1::a00:1"],
    "teredo.example.com": ["2001:0:4136:e378:8000:63bf:80ff:fffe"],
    "ula.example.com": ["fd12:3456::1"],
    "linklocal6.example.com": ["fe80::abcd"],
    "zero.example.com": ["0.0.0.0"],
    "mixed.example.com": [PUBLIC_V4, "10.0.0.1"],
    "mixed6.example.com": ["2606:4700:4700::1111", "::1"],
    "multicast.example.com": ["239.1.1.1"],
    "docs.example.com": ["192.0.2.10"],
}


@pytest.mark.parametrize("host", sorted(HOSTILE_RESOLUTIONS))
async def test_hostile_resolution_is_refused(host: str) -> None:
    guard = SSRFGuard(resolver=StaticResolver(HOSTILE_RESOLUTIONS))
    with pytest.raises(SSRFBlockedError):
        await guard.resolve(host, 80)
    with pytest.raises(SSRFBlockedError):
        await safe_fetch(guard, "GET", f"http://{host}/", inner_transport=_never_called())


def test_corpus_is_at_least_fifty() -> None:
    assert len(HOSTILE_URLS) + len(HOSTILE_RESOLUTIONS) >= 50


@pytest.mark.parametrize(
    "address", ["8.8.8.8", PUBLIC_V4, "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]
)
def test_public_addresses_are_admitted(address: str) -> None:
    assert address_block_reason(address) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("::ffff:0:127.0.0.1", "IPv4-translated address"),
        ("::ffff:0:8.8.8.8", "IPv4-translated address"),
        ("64:ff9b:1::808:808", "local-use NAT64 address"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo address"),
        ("::1:7f00:1", "IPv6 address outside global unicast (2000::/3)"),
        ("2002:7f00:1::", "IPv6 address embedding a loopback address"),
        ("64:ff9b::a9fe:a9fe", "IPv6 address embedding a cloud metadata address"),
        ("64:ff9b::a00:1", "IPv6 address embedding a private address"),
    ],
)
def test_ipv6_forms_embedding_ipv4_are_refused_with_their_reason(address: str, reason: str) -> None:
    assert address_block_reason(address) == reason
    assert address_block_reason(address, allow_loopback=True) == reason


def test_loopback_allowance_admits_only_loopback() -> None:
    assert address_block_reason("127.0.0.1", allow_loopback=True) is None
    assert address_block_reason("::1", allow_loopback=True) is None
    assert address_block_reason("10.0.0.1", allow_loopback=True) == "private address"
    assert address_block_reason("169.254.169.254", allow_loopback=True) == "cloud metadata address"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1")],
)
def test_legacy_ipv4_forms_are_understood(text: str, expected: str) -> None:
    assert str(parse_legacy_ipv4(text)) == expected
    assert parse_legacy_ipv4("example.com") is None


def _never_called() -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a refused request reached the network layer: {request.url}")

    return httpx.MockTransport(handler)


def _recording() -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="public")

    return httpx.MockTransport(handler), seen


async def test_connection_is_pinned_to_the_vetted_address() -> None:
    transport, seen = _recording()
    guard = SSRFGuard(resolver=StaticResolver({"api.example.com": [PUBLIC_V4]}))
    result = await safe_fetch(guard, "GET", "https://api.example.com/v1?q=1", inner_transport=transport)
    assert result.body == b"public"
    (request,) = seen
    assert request.url.host == PUBLIC_V4
    assert request.headers["host"] == "api.example.com"
    assert request.extensions["sni_hostname"] == "api.example.com"


async def test_dns_rebinding_second_answer_is_refused() -> None:
    resolver = StaticResolver({"rebind.example.com": [[PUBLIC_V4], ["127.0.0.1"]]})
    guard = SSRFGuard(resolver=resolver)
    transport, seen = _recording()
    await safe_fetch(guard, "GET", "http://rebind.example.com/", inner_transport=transport)
    with pytest.raises(SSRFBlockedError, match="loopback"):
        await safe_fetch(guard, "GET", "http://rebind.example.com/", inner_transport=transport)
    assert [r.url.host for r in seen] == [PUBLIC_V4]
    assert resolver.lookups == ["rebind.example.com", "rebind.example.com"]


async def test_rebinding_between_check_and_connect_cannot_reach_internal_address() -> None:
    # The URL check does no lookup; the single lookup at connect time is the one that is used.
    resolver = StaticResolver({"rebind.example.com": [["127.0.0.1"], [PUBLIC_V4]]})
    guard = SSRFGuard(resolver=resolver)
    guard.check_url("http://rebind.example.com/")
    with pytest.raises(SSRFBlockedError):
        await safe_fetch(guard, "GET", "http://rebind.example.com/", inner_transport=_never_called())


async def test_redirect_from_public_host_to_metadata_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})

    guard = SSRFGuard(resolver=StaticResolver({"api.example.com": [PUBLIC_V4]}))
    with pytest.raises(SSRFBlockedError, match="metadata"):
        await safe_fetch(guard, "GET", "http://api.example.com/", inner_transport=httpx.MockTransport(handler))


async def test_allow_list_and_ports() -> None:
    guard = SSRFGuard(resolver=StaticResolver({}), allowed_hosts=["*.example.com"], allowed_ports=[443])
    guard.check_url("https://api.example.com/")
    with pytest.raises(SSRFBlockedError, match="allow-list"):
        guard.check_url("https://example.org/")
    with pytest.raises(SSRFBlockedError, match="port"):
        guard.check_url("https://api.example.com:8443/")


# --- a real server on 127.0.0.1 that redirects to internal addresses -----------------------------------

REDIRECT_TARGETS = [
    "http://10.0.0.1/",
    "http://192.168.0.1/admin",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[fd00:ec2::254]/",
    "http://2130706433/",
    "http://internal.example.com/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_FLUSHALL",
    "http://user:pw@app.test/",
]


def _local_guard(**kwargs: object) -> SSRFGuard:
    resolver = StaticResolver({"app.test": ["127.0.0.1"], "internal.example.com": ["172.16.5.4"]})
    return SSRFGuard(resolver=resolver, allow_loopback=True, **kwargs)  # type: ignore[arg-type]


async def test_local_server_is_reached_by_name_with_host_header_kept(http_server) -> None:
    guard = _local_guard()
    result = await safe_fetch(guard, "POST", f"http://app.test:{http_server.port}/echo", content=b"body")
    assert result.status_code == 200
    assert result.body == f"POST app.test:{http_server.port} body".encode()


async def test_local_server_is_refused_without_loopback_allowance(http_server) -> None:
    guard = SSRFGuard(resolver=StaticResolver({"app.test": ["127.0.0.1"]}))
    with pytest.raises(SSRFBlockedError, match="loopback"):
        await safe_fetch(guard, "GET", f"http://app.test:{http_server.port}/ok")


@pytest.mark.parametrize("target", REDIRECT_TARGETS)
@pytest.mark.parametrize("status", [302, 307])
async def test_redirect_to_internal_address_is_refused(http_server, target: str, status: int) -> None:
    guard = _local_guard()
    url = str(httpx.URL(f"http://app.test:{http_server.port}/redirect", params={"to": target, "status": status}))
    with pytest.raises(SSRFBlockedError):
        await safe_fetch(guard, "GET", url)


async def test_redirects_are_followed_within_policy_and_capped(http_server) -> None:
    guard = _local_guard()
    base = f"http://app.test:{http_server.port}"
    url = str(httpx.URL(f"{base}/redirect", params={"to": f"{base}/ok", "status": 303}))
    result = await safe_fetch(guard, "POST", url, content=b"x")
    assert (result.status_code, result.body, result.redirects) == (200, b"hello", [f"{base}/ok"])
    with pytest.raises(ToolExecutionError, match="redirects"):
        await safe_fetch(guard, "GET", f"{base}/loop", limits=FetchLimits(max_redirects=3))


async def test_response_size_and_time_are_capped(http_server) -> None:
    guard = _local_guard()
    base = f"http://app.test:{http_server.port}"
    with pytest.raises(ToolExecutionError, match="larger"):
        await safe_fetch(guard, "GET", f"{base}/big?n=5000", limits=FetchLimits(max_response_bytes=1000))
    with pytest.raises(ToolExecutionError, match="longer"):
        await safe_fetch(guard, "GET", f"{base}/slow?s=1", limits=FetchLimits(timeout_s=0.2))
