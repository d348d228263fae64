"""Where webhook and Airflow hooks may send requests (``actions.webhook``).

Anyone who may write an action file chooses a hook's URL, and the request leaves from
the server's own network position. Addresses in ``denied_networks`` (by default the
link-local range where cloud hosts serve instance credentials, and its IPv6
counterparts) are always refused; ``deny_private`` also refuses loopback, private,
link-local, shared and reserved addresses (the server's own API among them).

A host name is resolved once, every address it resolves to is checked, and the
request then goes to the address that was checked (with the name kept for ``Host``
and TLS), so a name that resolves differently the second time cannot slip past.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: instance-metadata and other link-local addresses, refused unless configured away
DEFAULT_DENIED_NETWORKS = ("169.254.0.0/16", "fe80::/10", "fd00:ec2::/32")


class DestinationDeniedError(ValueError):
    """A hook's URL points at an address the server does not send hook requests to."""


def networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Parsed CIDR ranges. Raises ValueError for a malformed one."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


@dataclass(frozen=True, slots=True)
class HookDestinations:
    """Which addresses hook requests may reach (see module doc)."""

    denied_networks: tuple[IPNetwork, ...] = field(
        default_factory=lambda: networks(DEFAULT_DENIED_NETWORKS))
    deny_private: bool = False

    def refuses(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if any(address in net for net in self.denied_networks):
            return True
        return self.deny_private and not address.is_global

    def pin(self, url: str) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The URL to send to (its host replaced by a checked address), the ``Host``
        header and the request extensions that keep the name for TLS.

        Raises:
            DestinationDeniedError: the URL is malformed, cannot be resolved, or one of
                the addresses its host resolves to is refused.
        """
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise DestinationDeniedError(f"{url}: only http and https URLs are allowed")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, ValueError) as exc:
            raise DestinationDeniedError(f"{url}: cannot resolve {host}: {exc}") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        refused = [a for a in addresses if self.refuses(a)]
        if refused or not addresses:
            raise DestinationDeniedError(
                f"{url}: hook requests to {refused[0] if refused else host} are not "
                "allowed (actions.webhook)")
        chosen = addresses[0]
        literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
        netloc = f"{literal}:{parts.port}" if parts.port else literal
        pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
        return pinned, {"Host": parts.netloc.rpartition("@")[2]}, extensions

    def request(self, client: httpx.Client, method: str, url: str, *,
                headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Request:
        """A request for ``client`` to send to the checked address of ``url``.

        Raises:
            DestinationDeniedError: see :meth:`pin`.
        """
        pinned, host, extensions = self.pin(url)
        return client.build_request(method, pinned, headers={**(headers or {}), **host},
                                    extensions=extensions, **kwargs)
