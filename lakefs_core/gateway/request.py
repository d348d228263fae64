"""What one S3 request asks for: bucket and key (path or virtual-host style), query,
headers, the authenticated user and the body."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from lakefs_core.auth import rbac
from lakefs_core.auth.service import Principal
from lakefs_core.gateway.body import PullChunk, RequestBody
from lakefs_core.gateway.errors import S3Error
from lakefs_core.gateway.sigv4 import SignedRequest


def split_host(host: str) -> str:
    """The host name of a ``Host`` header, without port, lower-case."""
    host = host.strip().lower()
    if host.startswith("["):  # IPv6 literal
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host


def resolve_address(host: str, raw_path: str, domains: Sequence[str]) -> tuple[str, str]:
    """``(bucket, key)`` of a request.

    Virtual-host style when the host is ``<bucket>.<domain>`` for one of ``domains``
    (the whole path is then the key); path style (``/bucket/key``) otherwise.

    Args:
        host: The ``Host`` header.
        raw_path: The request path, still percent-encoded.
        domains: The gateway's domain names (``gateways.s3.domain_name``).
    """
    path = unquote(raw_path or "/")
    path = path[1:] if path.startswith("/") else path
    bucket = virtual_host_bucket(host, domains)
    if bucket is not None:
        return bucket, path
    bucket, _, key = path.partition("/")
    return bucket, key


def virtual_host_bucket(host: str, domains: Sequence[str]) -> str | None:
    """The bucket named by a ``<bucket>.<domain>`` host, or None (path style)."""
    name = split_host(host)
    for domain in domains:
        suffix = "." + domain.lower()
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def split_key(key: str) -> tuple[str, str]:
    """``(ref, path)`` of a gateway key ``<ref>/<path>``.

    Raises:
        S3Error: ``NoSuchKey`` when the key names no path inside a ref.
    """
    ref, sep, path = key.partition("/")
    if not ref or not sep or not path:
        raise S3Error("NoSuchKey", f"key {key!r} is not <ref>/<path>", 404)
    return ref, path


@dataclass
class S3Request:
    """One authenticated S3 request.

    Attributes:
        method: HTTP method.
        bucket: The repository ("" for the service, e.g. ListBuckets).
        key: The key inside the bucket ("" for bucket operations).
        query: Decoded query parameters (first value of each name).
        headers: Lower-case header names; repeated headers joined with ``,``.
        signed: The verified signature.
        user: The user owning the signing key.
        principal: Returns the user with its effective policies (current: see
            :class:`~lakefs_core.auth.service.AuthService`).
        pull: Returns the next raw body chunk and whether more follow.
        host: The ``Host`` header (for Location answers).
    """

    method: str
    bucket: str
    key: str
    query: dict[str, str]
    headers: dict[str, str]
    signed: SignedRequest
    user: str
    principal: Callable[[], Principal] = field(repr=False)
    pull: PullChunk = field(repr=False)
    host: str = ""
    _body_taken: bool = field(default=False, repr=False)

    @property
    def resource(self) -> str:
        """``/bucket/key`` for error documents."""
        return "/" + "/".join(p for p in (self.bucket, self.key) if p)

    def has(self, name: str) -> bool:
        """Whether the query names ``name`` (with or without a value)."""
        return name in self.query

    def body(self, *, want_md5: bool = False) -> RequestBody:
        """The request's payload, decoded and verified as it is read (once)."""
        if self._body_taken:
            raise RuntimeError("the request body was already taken")
        self._body_taken = True
        return RequestBody(self.pull, self.signed, self.headers, want_md5=want_md5)

    def check(self, *permissions: rbac.Permission) -> None:
        """Raise PermissionDeniedError unless the user may do all of ``permissions``."""
        self.principal().check(rbac.all_of(*permissions))


def header_dict(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case names to values; repeated headers joined with ``,``."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    return headers


def query_dict(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The first value of each query parameter."""
    query: dict[str, str] = {}
    for name, value in pairs:
        query.setdefault(name, value)
    return query
