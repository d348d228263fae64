"""AWS Signature Version 4 primitives: constants, the signing key, canonical forms.

Used to verify requests (:mod:`lakefs_core.gateway.sigv4`) and to sign them
(:mod:`lakefs_core.block.s3_requests`), so both follow one reading of the protocol.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_PAYLOAD_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_PAYLOAD_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"


def uri_encode(value: str, safe: str) -> str:
    """RFC 3986 encoding: unreserved characters (and ``safe``) stay, the rest is %XX."""
    return quote(value, safe=safe)


def canonical_query(pairs: Iterable[tuple[str, str]]) -> str:
    """The canonical query string: encoded pairs sorted by name, then value."""
    encoded = sorted((uri_encode(k, safe="-_.~"), uri_encode(v, safe="-_.~"))
                     for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def credential_scope(date: str, region: str, service: str) -> str:
    """``<yyyymmdd>/<region>/<service>/aws4_request``."""
    return f"{date}/{region}/{service}/aws4_request"


def string_to_sign(amz_date: str, scope: str, canonical_request: str) -> str:
    """What the signature signs: the algorithm, time, scope and the request's hash."""
    return "\n".join([ALGORITHM, amz_date, scope,
                      hashlib.sha256(canonical_request.encode()).hexdigest()])


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The SigV4 signing key of ``secret`` for one day, region and service."""
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(key: bytes, text: str) -> str:
    """The hex HMAC-SHA256 signature of ``text`` under a signing key."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
