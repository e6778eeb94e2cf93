"""The client's address: the connection's peer, or what a trusted reverse proxy says it forwarded.

``X-Forwarded-For`` is written by whoever sends the request, so it is believed only when the peer is a proxy
the operator names in ``SWITCHYARD_TRUSTED_PROXIES``. Then the header is read from the right (each proxy
appends the address it saw) and the first address that is not itself a trusted proxy is the client: what a
client writes at the left of the header is never reached while an address it cannot forge stands to its right.
``switchyard api`` and ``up`` start uvicorn with its own proxy-header handling off, so the peer seen here is
always the socket's.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from litestar.connection import ASGIConnection

from switchyard.platform.settings import proxy_networks

__all__ = ["client_address", "forwarded_client"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN_CLIENT = "unknown"


@lru_cache(maxsize=8)
def _networks(trusted_proxies: str) -> tuple[_Network, ...]:
    return proxy_networks(trusted_proxies)


def _trusted(address: str, networks: tuple[_Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
    return any(ip.version == network.version and ip in network for network in networks)


def forwarded_client(peer: str, forwarded_for: list[str], trusted_proxies: str) -> str:
    """The client behind ``peer`` given the ``X-Forwarded-For`` header values, believing only trusted proxies."""
    networks = _networks(trusted_proxies)
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
    client = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return client  # garbage where an address belongs: stop at the last hop a trusted proxy vouched for
        client = hop
        if not _trusted(hop, networks):
            return client
    return client


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The address a request came from, for limits and audit records (see the module docstring)."""
    peer = connection.client.host if connection.client else UNKNOWN_CLIENT
    trusted_proxies: str = connection.app.state.settings.trusted_proxies
    return forwarded_client(peer, connection.headers.getall("x-forwarded-for", []), trusted_proxies)
