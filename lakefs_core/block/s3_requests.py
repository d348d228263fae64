"""Plain S3 object GETs, HEADs and PUTs as SigV4-signed requests on a urllib3 pool,
and pre-signed URLs for the same requests.

boto3 spends several milliseconds of CPU on each request (event hooks, parameter
validation, response parsing), more than the transfer of a 1 MiB object itself.
:class:`S3ObjectRequests` sends the requests on the data path (GetObject, whole
or one range, HeadObject and a single-request PutObject) directly: sign, send, read.
It only handles success (and a HeadObject's 404). Every other answer (an error status, a redirect to
another region, a dropped connection) returns None, and the caller repeats the
operation through boto3, which owns retries, redirects and error codes.

:meth:`S3ObjectRequests.presign` signs the same requests into a URL (SigV4 query
signing, ``UNSIGNED-PAYLOAD``) that a client without credentials sends itself.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import re
import threading
import urllib.request
import zlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import urllib3
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.httpsession import DEFAULT_CA_BUNDLE

# the protocol's own pieces, shared with the gateway that verifies such signatures
from lakefs_core.protocol.sigv4 import (
    ALGORITHM,
    AMZ_DATE_FORMAT,
    UNSIGNED_PAYLOAD,
    canonical_query,
    credential_scope,
    sign,
    signing_key,
    string_to_sign,
)

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: buckets that can be addressed as ``<bucket>.<endpoint host>`` (as botocore decides)
_VIRTUAL_HOSTABLE = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]\Z")
_UNRESERVED = "-_.~"


def uri_encode_key(key: str) -> str:
    """S3's canonical (and wire) form of an object key: every byte but the
    unreserved characters and ``/`` percent-encoded, once."""
    return quote(key, safe="/" + _UNRESERVED)


def crc32_base64(data: bytes) -> str:
    """The ``x-amz-checksum-crc32`` value of ``data``."""
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def sign_headers(method: str, host: str, path: str, query: str, headers: dict[str, str],
                 payload_hash: str, credentials: ReadOnlyCredentials, region: str,
                 now: datetime, key_cache: dict[tuple[str, str], bytes] | None = None
                 ) -> dict[str, str]:
    """The headers of a SigV4-signed S3 request (``headers`` plus the signature's).

    ``path`` is already URI-encoded; ``query`` is the canonical query string.
    """
    access_key, secret = credentials.access_key or "", credentials.secret_key or ""
    amz_date = now.strftime(AMZ_DATE_FORMAT)
    date = amz_date[:8]
    signed = {name.lower(): value.strip() for name, value in headers.items()}
    signed["host"] = host
    signed["x-amz-date"] = amz_date
    signed["x-amz-content-sha256"] = payload_hash
    if credentials.token:
        signed["x-amz-security-token"] = credentials.token
    names = sorted(signed)
    canonical = "\n".join([
        method, path, query,
        "".join(f"{name}:{signed[name]}\n" for name in names),
        ";".join(names), payload_hash])
    scope = credential_scope(date, region, "s3")
    to_sign = string_to_sign(amz_date, scope, canonical)
    signature = sign(_signing_key(secret, date, region, key_cache), to_sign)
    signed["authorization"] = (f"{ALGORITHM} Credential={access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return signed


def _signing_key(secret: str, date: str, region: str,
                 key_cache: dict[tuple[str, str], bytes] | None) -> bytes:
    cache_key = (secret, credential_scope(date, region, "s3"))
    key = key_cache.get(cache_key) if key_cache is not None else None
    if key is None:
        key = signing_key(secret, date, region, "s3")
        if key_cache is not None:
            key_cache.clear()  # one date and region at a time is all that is reused
            key_cache[cache_key] = key
    return key


def _proxied(host: str) -> bool:
    proxies = urllib.request.getproxies_environment()
    return bool(proxies) and not urllib.request.proxy_bypass(host)


class S3ObjectRequests:
    """Signed GetObject/PutObject requests to one S3 endpoint.

    Args:
        endpoint_url: The endpoint boto3 resolved (``https://s3.<region>.amazonaws.com``
            or the configured one).
        region: The signing region.
        credentials: Where the keys come from (read for every request, so refreshing
            credentials keep working).
        path_style: Address buckets as ``<endpoint>/<bucket>``; otherwise buckets
            with DNS-safe names go in the host name, as boto3 does.
        max_connections: Connections kept per host.
        timeout: Seconds for connecting and for each read.
    """

    def __init__(self, endpoint_url: str, region: str, credentials: Credentials, *,
                 path_style: bool, max_connections: int = 10, timeout: float = 60.0) -> None:
        parts = urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"unsupported endpoint {endpoint_url!r}")
        self._scheme = parts.scheme
        self._hostname = parts.hostname
        self._port = parts.port
        self._netloc = parts.netloc
        self._base_path = parts.path.rstrip("/")
        self._region = region
        self._credentials = credentials
        self._path_style = path_style
        self._secure = parts.scheme == "https"
        self._pool = urllib3.PoolManager(
            maxsize=max_connections, block=False, retries=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            ca_certs=DEFAULT_CA_BUNDLE if self._secure else None)
        self._keys = threading.local()
        self.usable = not _proxied(parts.hostname)

    def close(self) -> None:
        self._pool.clear()

    # --- addressing ------------------------------------------------------------------
    def _target(self, bucket: str, key: str) -> tuple[str, str, str] | None:
        """``(host name, Host header, path)`` of an object, or None when it is not safe
        to send directly.

        Keys with empty, ``.`` or ``..`` segments are left to boto3: HTTP stacks may
        normalise such paths, and the object would not be the one asked for.
        """
        if any(segment in ("", ".", "..") for segment in key.split("/")):
            return None
        encoded = uri_encode_key(key)
        if self._path_style or "." in bucket or not _VIRTUAL_HOSTABLE.match(bucket):
            return self._hostname, self._netloc, f"{self._base_path}/{bucket}/{encoded}"
        return (f"{bucket}.{self._hostname}", f"{bucket}.{self._netloc}",
                f"{self._base_path}/{encoded}")

    def _send(self, method: str, bucket: str, key: str, body: bytes | None,
              headers: dict[str, str], preload: bool) -> Any:
        target = self._target(bucket, key)
        if target is None:
            return None
        hostname, host, path = target
        if body is None:
            payload_hash = EMPTY_SHA256
        elif self._secure:
            # TLS carries the bytes and S3 checks the CRC32 (boto3 does the same)
            payload_hash = UNSIGNED_PAYLOAD
            headers = {**headers, "x-amz-checksum-crc32": crc32_base64(body)}
        else:
            payload_hash = hashlib.sha256(body).hexdigest()
        credentials = self._credentials.get_frozen_credentials()
        if not credentials.access_key or not credentials.secret_key:
            return None
        signed = sign_headers(method, host, path, "", headers, payload_hash,
                              credentials, self._region,
                              datetime.now(UTC), self._key_cache())
        if body is not None:
            signed["content-length"] = str(len(body))
        try:
            pool = self._pool.connection_from_host(hostname, port=self._port,
                                                   scheme=self._scheme)
            return pool.urlopen(method, path, body=body, headers=signed, redirect=False,
                                preload_content=preload, assert_same_host=False)
        except (urllib3.exceptions.HTTPError, OSError):
            return None

    def _key_cache(self) -> dict[tuple[str, str], bytes]:
        cache: dict[tuple[str, str], bytes] | None = getattr(self._keys, "cache", None)
        if cache is None:
            cache = self._keys.cache = {}
        return cache

    # --- pre-signed URLs -------------------------------------------------------------
    def presign(self, method: str, bucket: str, key: str, expires_in: int, now: datetime,
                query: Mapping[str, str] | None = None) -> str:
        """A URL that performs ``method`` on the object without credentials of its own,
        valid for ``expires_in`` seconds from ``now``; ``query`` adds parameters that
        are signed with it (``partNumber`` and ``uploadId`` of an UploadPart).

        Raises:
            ValueError: the key cannot be addressed safely in a URL, or there are no
                credentials to sign with.
        """
        target = self._target(bucket, key)
        if target is None:
            raise ValueError(f"cannot pre-sign key {key!r}: empty, '.' or '..' segment")
        _, host, path = target
        credentials = self._credentials.get_frozen_credentials()
        if not credentials.access_key or not credentials.secret_key:
            raise ValueError("no credentials to pre-sign with")
        amz_date = now.strftime(AMZ_DATE_FORMAT)
        scope = credential_scope(amz_date[:8], self._region, "s3")
        params = {**(query or {}), "X-Amz-Algorithm": ALGORITHM,
                  "X-Amz-Credential": f"{credentials.access_key}/{scope}",
                  "X-Amz-Date": amz_date, "X-Amz-Expires": str(expires_in),
                  "X-Amz-SignedHeaders": "host"}
        if credentials.token:
            params["X-Amz-Security-Token"] = credentials.token
        signed_query = canonical_query(params.items())
        canonical = "\n".join([method, path, signed_query, f"host:{host}\n", "host",
                               UNSIGNED_PAYLOAD])
        key_bytes = _signing_key(credentials.secret_key, amz_date[:8], self._region,
                                 self._key_cache())
        signature = sign(key_bytes, string_to_sign(amz_date, scope, canonical))
        return f"{self._scheme}://{host}{path}?{signed_query}&X-Amz-Signature={signature}"

    # --- operations ------------------------------------------------------------------
    def put(self, bucket: str, key: str, body: bytes) -> str | None:
        """PutObject in one request; the ETag (quotes stripped), or None if not done."""
        response = self._send("PUT", bucket, key, body, {}, preload=True)
        if response is None or response.status != 200:
            return None
        etag = response.headers.get("etag")
        return etag.strip('"') if etag else None

    def get(self, bucket: str, key: str, first: int | None = None,
            last: int | None = None) -> bytes | None:
        """GetObject, whole or bytes ``first``..``last``; None if not answered in full."""
        headers = {} if first is None else {"range": f"bytes={first}-{last}"}
        response = self._send("GET", bucket, key, None, headers, preload=True)
        if response is None or response.status not in ((200,) if first is None else (206,)):
            return None
        return bytes(response.data)

    def head(self, bucket: str, key: str) -> tuple[int, str, float] | bool | None:
        """HeadObject: ``(size, etag without quotes, mtime)``; False when S3 answers
        404 (no such object, or no such bucket: a HEAD answer has no body to tell
        which); None for any other answer."""
        response = self._send("HEAD", bucket, key, None, {}, preload=True)
        if response is not None and response.status == 404:
            return False
        if response is None or response.status != 200:
            return None
        size, etag = response.headers.get("content-length"), response.headers.get("etag")
        modified = response.headers.get("last-modified")
        if size is None or not etag or not modified:
            return None
        try:
            mtime = email.utils.parsedate_to_datetime(modified).timestamp()
        except (TypeError, ValueError):
            return None
        return int(size), etag.strip('"'), mtime

    def open(self, bucket: str, key: str) -> Any:
        """A streaming GetObject response (urllib3), or None if not answered with 200."""
        response = self._send("GET", bucket, key, None, {}, preload=False)
        if response is None:
            return None
        if response.status != 200:
            response.drain_conn()
            response.release_conn()
            return None
        return response


def iter_response(response: Any, chunk_size: int) -> Iterator[bytes]:
    """The body of a streaming response, chunk by chunk; the connection goes back to
    the pool at the end (or is closed if the reader stops early)."""
    finished = False
    try:
        yield from response.stream(chunk_size)
        finished = True
    finally:
        if finished:
            response.release_conn()
        else:
            response.close()
