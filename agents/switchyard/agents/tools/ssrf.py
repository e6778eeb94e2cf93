"""SSRF guard: which URLs and which resolved addresses an agent tool may connect to.

The guard is applied twice: :meth:`SSRFGuard.check_url` refuses a URL on its face (scheme, userinfo,
numeric-host tricks, names such as ``localhost`` or ``metadata.google.internal``, ports, the allow-list),
and :meth:`SSRFGuard.resolve` resolves the host *once* with the injected resolver, refuses the answer if
**any** address is not a public unicast address, and returns the address to connect to. The pinned
transports in :mod:`switchyard.agents.tools.transport` connect to exactly that address (keeping the
``Host`` header and TLS SNI), so a DNS answer that changes between check and connect (rebinding) cannot
reach an internal address. Every redirect hop goes through the same transport and is checked again.

Loopback is refused like everything else unless the guard is built with ``allow_loopback=True``, a flag
that exists for tests that talk to servers they start on 127.0.0.1.
"""

from __future__ import annotations

import inspect
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import httpx

from switchyard.agents.errors import SSRFBlockedError

__all__ = [
    "BLOCKED_HOST_NAMES",
    "BLOCKED_HOST_SUFFIXES",
    "METADATA_ADDRESSES",
    "Resolver",
    "SSRFGuard",
    "StaticResolver",
    "address_block_reason",
    "parse_legacy_ipv4",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: ``resolver(host, port)`` returns the addresses (as strings) the host resolves to. Sync or async.
Resolver = Callable[[str, int], Awaitable[Sequence[str]] | Sequence[str]]

#: Cloud instance-metadata endpoints, refused with their own reason (most are also non-global).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean IMDS
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer (a public-range address)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS DNS over IPv6
    )
)

#: Host names refused whatever they resolve to.
BLOCKED_HOST_NAMES: frozenset[str] = frozenset(
    {
        "localhost",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "kubernetes.default",
        "kubernetes.default.svc",
    }
)

#: Host name suffixes refused whatever they resolve to (internal, mDNS and reverse-DNS zones).
BLOCKED_HOST_SUFFIXES: tuple[str, ...] = (
    ".localhost",
    ".local",
    ".internal",
    ".localdomain",
    ".home.arpa",
    ".in-addr.arpa",
    ".ip6.arpa",
    ".svc.cluster.local",
)

_V4_BLOCKS: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(net), reason)
    for net, reason in (
        ("0.0.0.0/8", "unspecified address"),
        ("10.0.0.0/8", "private address"),
        ("100.64.0.0/10", "carrier-grade NAT address"),
        ("127.0.0.0/8", "loopback address"),
        ("169.254.0.0/16", "link-local address"),
        ("172.16.0.0/12", "private address"),
        ("192.0.0.0/24", "IETF protocol assignment"),
        ("192.0.2.0/24", "documentation address"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private address"),
        ("198.18.0.0/15", "benchmarking address"),
        ("198.51.100.0/24", "documentation address"),
        ("203.0.113.0/24", "documentation address"),
        ("224.0.0.0/4", "multicast address"),
        ("240.0.0.0/4", "reserved address"),
    )
)

_V6_BLOCKS: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(net), reason)
    for net, reason in (
        ("::/128", "unspecified address"),
        ("::1/128", "loopback address"),
        ("::/96", "IPv4-compatible IPv6 address"),
        # SIIT's IPv4-translated form (RFC 2765): never a destination, though Python calls it global
        ("::ffff:0:0:0/96", "IPv4-translated address"),
        ("64:ff9b:1::/48", "local-use NAT64 address"),
        ("100::/64", "discard-only address"),
        ("2001::/32", "Teredo address"),
        ("2001:db8::/32", "documentation address"),
        ("fc00::/7", "unique local (private) address"),
        ("fe80::/10", "link-local address"),
        ("fec0::/10", "site-local address"),
        ("ff00::/8", "multicast address"),
    )
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: The only IPv6 unicast space routed on the Internet today; anything outside it (bar NAT64) is refused,
#: so a form that embeds an IPv4 address in some other reserved block cannot slip through.
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def _is_loopback(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip == _LOOPBACK_V6:
            return True
        mapped = ip.ipv4_mapped
        return mapped is not None and mapped in _LOOPBACK_V4
    return ip in _LOOPBACK_V4


def address_block_reason(address: str | IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``address`` must not be connected to, or ``None`` when it is a public unicast address.

    IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry; 6to4 and NAT64 addresses are
    judged by the IPv4 address they embed as well as by themselves; IPv4-translated, local-use NAT64,
    Teredo and IPv4-compatible addresses are refused whatever they embed, and so is every IPv6 address
    outside 2000::/3 and 64:ff9b::/96. ``allow_loopback`` admits 127.0.0.0/8 and ``::1`` (and their
    mapped forms) only.
    """
    if isinstance(address, str):
        text = address.strip().strip("[]")
        if "%" in text:  # an IPv6 zone index: only meaningful for link-local addresses
            return "scoped IPv6 address"
        try:
            ip: IPAddress = ipaddress.ip_address(text)
        except ValueError:
            return "not an IP address"
    else:
        ip = address
    if allow_loopback and _is_loopback(ip):
        return None
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            inner = address_block_reason(mapped)
            return f"IPv4-mapped {inner}" if inner else None
        for net, reason in _V6_BLOCKS:
            if ip in net:
                return reason
        embedded = ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            inner = address_block_reason(embedded)
            if inner:
                return f"IPv6 address embedding a {inner}"
        if ip not in _GLOBAL_UNICAST_V6 and ip not in _NAT64:
            return "IPv6 address outside global unicast (2000::/3)"
    else:
        for v4net, reason in _V4_BLOCKS:
            if ip in v4net:
                return reason
        if ip == ipaddress.IPv4Address("255.255.255.255"):
            return "broadcast address"
    if not ip.is_global:
        return "address not globally routable"
    return None


def parse_legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Parse ``host`` the way ``inet_aton`` (and browsers) do: ``2130706433``, ``0177.1``, ``0x7f.0.0.1``.

    Returns ``None`` when ``host`` is not such a number. The guard refuses every host this parses unless it
    is already the canonical dotted quad, because other components may read the same text differently.
    """
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        lower = part.lower()
        try:
            if lower.startswith("0x"):
                value = int(lower[2:] or "0", 16)
            elif len(lower) > 1 and lower.startswith("0"):
                value = int(lower, 8)
            else:
                if not lower.isdigit():
                    return None
                value = int(lower, 10)
        except ValueError:
            return None
        values.append(value)
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the operating system's resolver (all A and AAAA answers, in order)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


class StaticResolver:
    """A resolver answering from a table, for tests and for operators pinning names.

    Each value is either a list of addresses (the same answer every time) or a list of such lists, served
    one per lookup with the last one repeated: ``{"rebind.test": [["93.184.216.34"], ["127.0.0.1"]]}``
    models a DNS-rebinding server. Unknown names raise :class:`OSError` like a failed lookup.
    """

    def __init__(self, table: Mapping[str, Sequence[str] | Sequence[Sequence[str]]]) -> None:
        self._answers: dict[str, list[list[str]]] = {}
        for name, value in table.items():
            if value and not isinstance(value[0], str):
                self._answers[name.lower()] = [list(answer) for answer in value]
            else:
                self._answers[name.lower()] = [[str(a) for a in value]]
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        answers = self._answers.get(host.lower())
        if answers is None:
            raise OSError(f"name not found: {host}")
        answer = answers[0] if len(answers) == 1 else answers.pop(0)
        return list(answer)


def _host_matches(host: str, pattern: str) -> bool:
    pattern = pattern.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


class SSRFGuard:
    """Decides which URLs and addresses an outbound request may use; see the module docstring.

    ``allowed_hosts`` (exact names or ``*.example.com`` patterns) restricts hosts when given; it never
    admits an address the address policy refuses. ``allowed_ports`` restricts ports when given.
    ``allow_loopback`` admits 127.0.0.0/8 and ``::1`` — for tests only.
    """

    def __init__(
        self,
        *,
        resolver: Resolver | None = None,
        allowed_hosts: Iterable[str] | None = None,
        allowed_ports: Iterable[int] | None = None,
        allowed_schemes: Iterable[str] = ("http", "https"),
        allow_loopback: bool = False,
    ) -> None:
        self._resolver: Resolver = resolver if resolver is not None else system_resolver
        self.allowed_hosts = None if allowed_hosts is None else tuple(h.lower() for h in allowed_hosts)
        self.allowed_ports = None if allowed_ports is None else frozenset(allowed_ports)
        self.allowed_schemes = frozenset(s.lower() for s in allowed_schemes)
        self.allow_loopback = allow_loopback

    # -- URL on its face -------------------------------------------------------------------------------

    def check_url(self, url: str | httpx.URL | Any) -> httpx.URL:
        """Return ``url`` parsed, or raise :class:`SSRFBlockedError` if it may not be requested at all."""
        raw = str(url)
        if any(ch in raw for ch in "\\\t\r\n ") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw):
            raise SSRFBlockedError("whitespace, control character or backslash in URL", raw)
        try:
            parsed = httpx.URL(raw)
        except (httpx.InvalidURL, ValueError) as exc:
            raise SSRFBlockedError(f"unparseable URL: {exc}", raw) from None
        if parsed.scheme not in self.allowed_schemes:
            raise SSRFBlockedError("scheme not allowed", raw)
        if parsed.userinfo:
            raise SSRFBlockedError("credentials in URL", raw)
        self.check_host(parsed.host)
        port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
        if not 0 < port < 65536:
            raise SSRFBlockedError("port out of range", raw)
        if self.allowed_ports is not None and port not in self.allowed_ports:
            raise SSRFBlockedError("port not allowed", raw)
        return parsed

    def check_host(self, host: str) -> None:
        """Refuse hosts that are blocked by name or spelled as a non-canonical number."""
        if not host:
            raise SSRFBlockedError("empty host", host)
        name = host.lower().rstrip(".")
        literal = _ip_literal(name)
        if literal is not None:
            reason = address_block_reason(literal, allow_loopback=self.allow_loopback)
            if reason:
                raise SSRFBlockedError(reason, host)
        else:
            if "%" in name:
                raise SSRFBlockedError("percent-encoded or scoped host", host)
            labels = name.split(".")
            if not all(_HOST_LABEL.match(label) for label in labels):
                raise SSRFBlockedError("invalid host name", host)
            if _NUMERIC_LABEL.match(labels[-1]):
                raise SSRFBlockedError("numeric host in non-canonical form", host)
            test_localhost = self.allow_loopback and name == "localhost"
            if (name in BLOCKED_HOST_NAMES or name.endswith(BLOCKED_HOST_SUFFIXES)) and not test_localhost:
                raise SSRFBlockedError("internal host name", host)
            if len(labels) == 1 and not test_localhost:
                raise SSRFBlockedError("single-label host name", host)
        if self.allowed_hosts is not None and not any(_host_matches(name, p) for p in self.allowed_hosts):
            raise SSRFBlockedError("host not in allow-list", host)

    # -- addresses at connect time ---------------------------------------------------------------------

    def check_address(self, address: str) -> None:
        """Raise :class:`SSRFBlockedError` unless ``address`` may be connected to."""
        reason = address_block_reason(address, allow_loopback=self.allow_loopback)
        if reason:
            raise SSRFBlockedError(reason, address)

    async def resolve(self, host: str, port: int) -> str:
        """Resolve ``host`` once, check every answer, and return the address to connect to."""
        self.check_host(host)
        name = host.lower().rstrip(".")
        literal = _ip_literal(name)
        if literal is not None:
            return str(literal)
        try:
            answer = self._resolver(name, port)
            if inspect.isawaitable(answer):
                answer = await answer
        except OSError as exc:
            raise SSRFBlockedError(f"name does not resolve: {exc}", host) from None
        addresses = list(answer)
        if not addresses:
            raise SSRFBlockedError("name resolves to no address", host)
        for address in addresses:
            reason = address_block_reason(address, allow_loopback=self.allow_loopback)
            if reason:
                raise SSRFBlockedError(f"{name} resolves to a {reason}", address)
        return str(ipaddress.ip_address(addresses[0].strip("[]")))


def _ip_literal(name: str) -> IPAddress | None:
    """The address a host names literally (canonical forms only), or ``None`` for a host name."""
    text = name.strip("[]")
    if ":" in text:
        if "%" in text:
            raise SSRFBlockedError("scoped IPv6 address", name)
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            raise SSRFBlockedError("invalid IPv6 literal", name) from None
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        pass
    legacy = parse_legacy_ipv4(text)
    if legacy is not None:
        raise SSRFBlockedError(f"numeric host in non-canonical form (means {legacy})", name)
    return None
