"""Where a Lua hook's network calls may not go: link-local addresses.

On cloud hosts the instance metadata service answers there (``169.254.169.254``,
``fd00:ec2::254``) with the host's own credentials, so a hook able to reach it could
act as the server. :func:`check_endpoint` refuses such an endpoint before anything is
sent (the ``aws`` module's clients); :func:`guard_connections`, installed in every Lua
worker process, refuses any socket connection there, whatever module opens it and
wherever a name resolves or a redirect leads.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

#: networks no hook connects to
REFUSED_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128"))


class RefusedAddressError(OSError):
    """A connection to a link-local (cloud instance metadata) address."""


def is_refused(host: str) -> bool:
    """Whether ``host`` (an IP address; names are never refused here) is link-local."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in REFUSED_NETWORKS)


def _refusal(host: str) -> RefusedAddressError:
    return RefusedAddressError(
        f"connection to {host} refused: link-local addresses (cloud instance metadata) "
        "are not reachable from lua hooks")


def check_endpoint(url: str) -> None:
    """Refuse an endpoint whose host is, or resolves to, a link-local address.

    Raises:
        RefusedAddressError: it does.
        ValueError: not a URL with a host.
    """
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"endpoint {url!r}: a URL with a host expected")
    try:
        resolved = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        resolved = set()  # unresolvable: the connection fails on its own
    for address in {host, *resolved}:
        if is_refused(address):
            raise _refusal(address)


def _checked(address: Any) -> None:
    if isinstance(address, tuple) and address and isinstance(address[0], str) \
            and is_refused(address[0]):
        raise _refusal(address[0])


def guard_connections() -> None:
    """Make every socket of this process refuse to connect to a link-local address."""
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded_connect(self: socket.socket, address: Any) -> None:
        _checked(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        _checked(address)
        return connect_ex(self, address)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]
