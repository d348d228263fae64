"""Verification of AWS Signature Version 2 (HMAC-SHA1) S3 requests.

boto3 still presigns S3 URLs with version 2 unless told otherwise, and older S3 tools
sign every request with it; lakeFS accepts both versions, so the gateway does too.

Two forms:

- the ``Authorization: AWS <key>:<signature>`` header, dated by ``Date`` (or
  ``x-amz-date``), within 15 minutes of the server's clock;
- presigned URLs: ``AWSAccessKeyId``, ``Signature`` and ``Expires`` (epoch seconds)
  in the query, at most 7 days ahead (the longest a version 4 URL may live).

The string to sign is the method, ``Content-MD5``, ``Content-Type``, the date (the
``Expires`` value for presigned URLs), the ``x-amz-*`` headers sorted by name, and
the resource: ``/bucket/key`` as sent plus the S3 sub-resources of the query. The
body is not signed (``Content-MD5``, when sent, is checked against it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote

from lakefs_core.errors import (
    InvalidAccessKeyIdError,
    MalformedAuthorizationError,
    NotFoundError,
    RequestExpiredError,
    RequestTimeTooSkewedError,
    SignatureMismatchError,
)
from lakefs_core.gateway.sigv4 import (
    MAX_CLOCK_SKEW,
    MAX_PRESIGNED_EXPIRES,
    UNSIGNED_PAYLOAD,
    SecretLookup,
    SignedRequest,
)

#: query parameters that are part of the signed resource
SUB_RESOURCES = frozenset({
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock",
    "partNumber", "policy", "replication", "requestPayment", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "response-content-language",
    "response-content-type", "response-expires", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website",
})
_PREFIX = "AWS "


def is_v2_signed(headers: dict[str, str], query: Iterable[tuple[str, str]]) -> bool:
    """Whether a request carries a version 2 signature (header or presigned)."""
    if headers.get("authorization", "").startswith(_PREFIX):
        return True
    return any(name == "AWSAccessKeyId" for name, _ in query)


def _resources(raw_path: str, bucket_prefix: str) -> list[str]:
    paths = [raw_path or "/"]
    strict = quote(unquote(paths[0]), safe="/~")
    if strict != paths[0]:
        paths.append(strict)
    resources = [bucket_prefix + p for p in paths]
    if resources[0].count("/") == 1 and resources[0] != "/":
        resources.append(resources[0] + "/")  # a bucket is signed as "/bucket/"
    return resources


def _sub_resources(raw_query: str) -> str:
    pairs = []
    for part in raw_query.split("&"):
        name, sep, value = part.partition("=")
        name = unquote(name)
        if name in SUB_RESOURCES:
            pairs.append((name, f"{name}={unquote(value)}" if sep else name))
    pairs.sort(key=lambda p: p[0])
    return "?" + "&".join(text for _, text in pairs) if pairs else ""


def _amz_headers(items: Iterable[tuple[str, str]]) -> str:
    found: dict[str, list[str]] = {}
    for name, value in items:
        if name.lower().startswith("x-amz-"):
            found.setdefault(name.lower(), []).append(value.strip())
    return "".join(f"{name}:{','.join(found[name])}\n" for name in sorted(found))


def verify_v2(method: str, raw_path: str, raw_query: str, headers: dict[str, str],
              secret_for: SecretLookup, *, bucket_prefix: str = "",
              now: datetime | None = None) -> SignedRequest:
    """Verify a version 2 signature.

    Args:
        method: HTTP method.
        raw_path: The path as sent (percent-encoded), without the query.
        raw_query: The raw query string.
        headers: Lower-case header names to values.
        secret_for: Returns the secret of an access key id (None if unknown).
        bucket_prefix: ``/<bucket>`` for virtual-host requests (the signed resource
            always names the bucket), "" for path-style ones.
        now: The current time; defaults to the clock.

    Returns:
        The verified request; its body is unsigned.

    Raises:
        MalformedAuthorizationError, RequestExpiredError, RequestTimeTooSkewedError,
        InvalidAccessKeyIdError, SignatureMismatchError.
    """
    now = now or datetime.now(UTC)
    query = {unquote(k): unquote(v) for k, _, v in (p.partition("=") for p in
                                                    raw_query.split("&") if p)}
    authorization = headers.get("authorization", "")
    amz_items = [(k, v) for k, v in headers.items() if k.startswith("x-amz-")]
    content_md5 = headers.get("content-md5", "")
    content_type = headers.get("content-type", "")
    presigned = not authorization.startswith(_PREFIX)
    if presigned:
        missing = [k for k in ("AWSAccessKeyId", "Signature", "Expires") if k not in query]
        if missing:
            raise MalformedAuthorizationError(f"presigned query is missing {', '.join(missing)}")
        key_id, signature = query["AWSAccessKeyId"], query["Signature"]
        try:
            expires = int(query["Expires"])
        except ValueError:
            raise MalformedAuthorizationError("malformed Expires") from None
        if now.timestamp() > expires:
            raise RequestExpiredError("Request has expired")
        if expires > now.timestamp() + MAX_PRESIGNED_EXPIRES + MAX_CLOCK_SKEW.total_seconds():
            # as for version 4 URLs: a leaked URL must not be good for years
            raise MalformedAuthorizationError(
                f"Expires must be at most {MAX_PRESIGNED_EXPIRES} seconds (7 days) from now")
        dates = [query["Expires"]]
        # a presigning client moves x-amz-* (and content) headers into the query
        amz_items += [(k, v) for k, v in query.items() if k.lower().startswith("x-amz-")]
        content_md5 = query.get("content-md5", content_md5)
        content_type = query.get("content-type", content_type)
    else:
        key_id, sep, signature = authorization[len(_PREFIX):].strip().rpartition(":")
        if not sep or not key_id or not signature:
            raise MalformedAuthorizationError("malformed AWS authorization header")
        date_text = headers.get("x-amz-date") or headers.get("date")
        if not date_text:
            raise MalformedAuthorizationError("missing Date header")
        try:
            when = parsedate_to_datetime(date_text)
        except (TypeError, ValueError):
            raise MalformedAuthorizationError(f"malformed date {date_text!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if abs(now - when) > MAX_CLOCK_SKEW:
            raise RequestTimeTooSkewedError(
                "The difference between the request time and the server's time is too large")
        # with x-amz-date, S3 signs an empty Date line; some clients sign the Date anyway
        dates = ["", headers.get("date", "")] if "x-amz-date" in headers else [date_text]

    try:
        secret = secret_for(key_id)
    except (NotFoundError, KeyError):
        secret = None
    if secret is None:
        raise InvalidAccessKeyIdError(
            f"The AWS access key id you provided does not exist: {key_id}")
    amz = _amz_headers(amz_items)
    sub = _sub_resources(raw_query)
    for date in dates:
        for resource in _resources(raw_path, bucket_prefix):
            string_to_sign = (f"{method.upper()}\n{content_md5}\n{content_type}\n{date}\n"
                              f"{amz}{resource}{sub}")
            digest = hmac.new(secret.encode(), string_to_sign.encode(), hashlib.sha1).digest()
            if hmac.compare_digest(base64.b64encode(digest).decode(), signature):
                return SignedRequest(key_id, presigned, UNSIGNED_PAYLOAD, "", "", signature,
                                     b"")
    raise SignatureMismatchError(
        "The request signature we calculated does not match the signature you provided")
