"""Where a Lua hook's network calls may not go: ``actions.webhook``'s denied networks.

By default those are the link-local ranges: on cloud hosts the instance metadata
service answers there (``169.254.169.254``, ``fd00:ec2::254``) with the host's own
credentials, so a hook able to reach it could act as the server; with
``deny_private`` loopback, private and reserved addresses are refused too, as for
webhooks (:mod:`lakefs_core.actions.destinations`). :func:`check_endpoint` refuses
such an endpoint before anything is sent (the ``aws`` module's clients);
:func:`guard_connections`, installed in every Lua worker process, refuses any socket
connection there, whatever module opens it and wherever a name resolves or a
redirect leads.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from lakefs_core.actions.destinations import HookDestinations, networks

#: what this process refuses (set by :func:`guard_connections`)
_refused = HookDestinations()


class RefusedAddressError(OSError):
    """A connection to a link-local (cloud instance metadata) address."""


def is_refused(host: str) -> bool:
    """Whether ``host`` (an IP address; names are never refused here) is refused."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return _refused.refuses(ip)


def _refusal(host: str) -> RefusedAddressError:
    return RefusedAddressError(
        f"connection to {host} refused: the address is not reachable from lua hooks "
        "(actions.webhook)")


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


def guard_connections(refused_networks: tuple[str, ...] | list[str],
                      deny_private: bool = False) -> None:
    """Make every socket of this process refuse to connect to a refused address."""
    global _refused
    _refused = HookDestinations(networks(refused_networks), deny_private)
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded_connect(self: socket.socket, address: Any) -> None:
        _checked(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        _checked(address)
        return connect_ex(self, address)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]
