"""Verification of AWS Signature Version 4 requests for the S3 gateway.

Two forms are accepted:

- the ``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
  Signature=...`` header, with the date in ``X-Amz-Date`` (or ``Date``) and the
  declared payload hash in ``X-Amz-Content-SHA256``;
- presigned URLs: ``X-Amz-Algorithm``, ``X-Amz-Credential``, ``X-Amz-Date``,
  ``X-Amz-Expires``, ``X-Amz-SignedHeaders`` and ``X-Amz-Signature`` in the query.

The canonical URI follows S3's rules: every path segment URI-encoded once (S3 does not
double-encode and does not normalize ``.``/``..``). The request's path is decoded and
re-encoded that way; the path exactly as sent is tried too, for clients that sign the
bytes they send. The declared payload hash may be a hex SHA-256 (which the gateway
must check against the body it reads: see :attr:`SignedRequest.payload_digest`),
``UNSIGNED-PAYLOAD``, or one of the ``STREAMING-*`` values of ``aws-chunked`` uploads,
whose body :class:`AwsChunkedDecoder` decodes and, when signed, verifies chunk by chunk.

Errors (all :class:`~lakefs_core.errors.AuthenticationError`) and the S3 codes a
gateway answers with:

- :class:`~lakefs_core.errors.InvalidAccessKeyIdError`: 403 ``InvalidAccessKeyId``
- :class:`~lakefs_core.errors.SignatureMismatchError`: 403 ``SignatureDoesNotMatch``
- :class:`~lakefs_core.errors.RequestExpiredError`: 403 ``AccessDenied``
- :class:`~lakefs_core.errors.RequestTimeTooSkewedError`: 403 ``RequestTimeTooSkewed``
- :class:`~lakefs_core.errors.MalformedAuthorizationError`: 400
  ``AuthorizationHeaderMalformed`` (header form) or
  ``AuthorizationQueryParametersError`` (presigned form)
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import unquote

from lakefs_core.errors import (
    HeadersNotSignedError,
    InvalidAccessKeyIdError,
    MalformedAuthorizationError,
    NotFoundError,
    RequestExpiredError,
    RequestTimeTooSkewedError,
    SignatureMismatchError,
    ValidationError,
    WrongSigningScopeError,
)
from lakefs_core.protocol.sigv4 import (
    ALGORITHM,
    STREAMING_PAYLOAD,
    STREAMING_PAYLOAD_TRAILER,
    STREAMING_UNSIGNED_PAYLOAD_TRAILER,
    UNSIGNED_PAYLOAD,
    canonical_query,
    credential_scope,
    sign,
    signing_key,
    string_to_sign,
    uri_encode,
)

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

#: the longest validity a presigned URL may ask for (7 days, as S3)
MAX_PRESIGNED_EXPIRES = 7 * 24 * 3600
#: the service name in the credential scope of S3 requests
SERVICE = "s3"
#: how far a signed request's date may be from the server's clock
MAX_CLOCK_SKEW = timedelta(minutes=15)

_SIGNED_PAYLOADS = frozenset({STREAMING_PAYLOAD, STREAMING_PAYLOAD_TRAILER})
_DECLARED_CONSTANTS = frozenset({UNSIGNED_PAYLOAD, STREAMING_UNSIGNED_PAYLOAD_TRAILER,
                                 *_SIGNED_PAYLOADS})
_HEX_SHA256 = re.compile(r"^[0-9a-fA-F]{64}\Z")
_AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"

#: returns the secret of an access key id; None (or NotFoundError/KeyError) if unknown
SecretLookup = Callable[[str], "str | None"]
HeadersLike = Mapping[str, str] | Iterable[tuple[str, str]]
QueryLike = str | Iterable[tuple[str, str]]


@dataclass(frozen=True)
class SignedRequest:
    """A request whose signature was verified.

    Attributes:
        access_key_id: The key that signed the request.
        presigned: Whether the signature came from the query string.
        payload_hash: The declared payload hash (hex digest or a constant such as
            ``UNSIGNED-PAYLOAD``).
        amz_date: The request's signing time, ``YYYYMMDDTHHMMSSZ``.
        scope: ``<date>/<region>/<service>/aws4_request``.
        signature: The request's (seed) signature, hex.
        signing_key: The derived key, for verifying ``aws-chunked`` chunk signatures.
    """

    access_key_id: str
    presigned: bool
    payload_hash: str
    amz_date: str
    scope: str
    signature: str
    signing_key: bytes = field(repr=False)

    @property
    def region(self) -> str:
        """The region named in the credential scope."""
        return self.scope.split("/")[1]

    @property
    def streaming(self) -> bool:
        """Whether the body is ``aws-chunked`` (decode it with AwsChunkedDecoder)."""
        return self.payload_hash.startswith("STREAMING-")

    @property
    def payload_digest(self) -> str | None:
        """The hex SHA-256 the body must have, or None when the body is not hashed."""
        if _HEX_SHA256.match(self.payload_hash):
            return self.payload_hash.lower()
        return None


# --- input normalization -------------------------------------------------------------
def parse_query(raw_query: str) -> list[tuple[str, str]]:
    """Split a raw query string into percent-decoded pairs, keeping blank values.

    Unlike form decoding, ``+`` stays ``+``: S3 clients encode spaces as ``%20``.
    """
    pairs: list[tuple[str, str]] = []
    for part in raw_query.split("&"):
        if part:
            key, _, value = part.partition("=")
            pairs.append((unquote(key), unquote(value)))
    return pairs


def _header_bag(headers: HeadersLike) -> dict[str, list[str]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    bag: dict[str, list[str]] = {}
    for name, value in items:
        bag.setdefault(name.lower(), []).append(value)
    return bag


def _first(bag: dict[str, list[str]], name: str) -> str | None:
    values = bag.get(name)
    return values[0] if values else None


def is_signed(headers: HeadersLike, query: QueryLike) -> bool:
    """Whether a request carries a SigV4 signature (header or presigned form)."""
    pairs = parse_query(query) if isinstance(query, str) else list(query)
    if any(k == "X-Amz-Algorithm" for k, _ in pairs):
        return True
    auth = _first(_header_bag(headers), "authorization")
    return auth is not None and auth.startswith(ALGORITHM)


# --- canonical request ---------------------------------------------------------------
def _canonical_uris(raw_path: str) -> list[str]:
    raw = raw_path or "/"
    strict = uri_encode(unquote(raw), safe="/~")
    return [strict] if strict == raw else [strict, raw]


def _query_readings(query: QueryLike,
                    pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The ways the query may have been meant: a raw ``+`` is a plus sign to S3 clients
    that percent-encode, and a space to those that form-encode."""
    if isinstance(query, str) and "+" in query:
        return [pairs, parse_query(query.replace("+", "%20"))]
    return [pairs]


def _canonical_headers(bag: dict[str, list[str]], signed: list[str]) -> str:
    lines = []
    for name in signed:
        values = bag.get(name, [])
        lines.append(f"{name}:{','.join(' '.join(v.split()) for v in values)}")
    return "\n".join(lines) + "\n"


# --- parsing the two forms --------------------------------------------------------------
@dataclass(frozen=True)
class _Claim:
    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: list[str]
    signature: str
    amz_date: str


def _parse_credential(credential: str, error: type[Exception]) -> tuple[str, str, str, str]:
    parts = credential.rsplit("/", 4)
    if len(parts) != 5 or parts[4] != "aws4_request" or not all(parts[:4]):
        raise error(f"malformed credential scope: {credential!r}")
    return parts[0], parts[1], parts[2], parts[3]


def _parse_signature(value: str, error: type[Exception]) -> str:
    if not _HEX_SHA256.match(value):
        raise error("malformed signature: expected 64 hex digits")
    return value.lower()


def _parse_signed_headers(value: str, error: type[Exception]) -> list[str]:
    names = [n.strip().lower() for n in value.split(";")]
    if not value or not all(names):
        raise error(f"malformed signed headers: {value!r}")
    return sorted(set(names))


def _parse_amz_date(value: str | None, error: type[Exception]) -> datetime:
    if value is None:
        raise error("missing request date (X-Amz-Date)")
    try:
        return datetime.strptime(value, _AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise error(f"malformed request date: {value!r}") from exc


def _header_claim(bag: dict[str, list[str]], authorization: str) -> tuple[_Claim, datetime]:
    error = MalformedAuthorizationError
    algorithm, _, rest = authorization.partition(" ")
    if algorithm != ALGORITHM:
        raise error(f"unsupported authorization algorithm: {algorithm!r}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if k not in fields]
    if missing:
        raise error(f"authorization header is missing {', '.join(missing)}")
    key_id, date, region, service = _parse_credential(fields["Credential"], error)
    amz_date = _first(bag, "x-amz-date")
    if amz_date is None and (http_date := _first(bag, "date")) is not None:
        try:
            parsed = parsedate_to_datetime(http_date)
            if parsed.tzinfo is None:  # "-0000": UTC with no zone stated
                parsed = parsed.replace(tzinfo=UTC)
            amz_date = parsed.astimezone(UTC).strftime(_AMZ_DATE_FORMAT)
        except (TypeError, ValueError) as exc:
            raise error(f"malformed Date header: {http_date!r}") from exc
    when = _parse_amz_date(amz_date, error)
    assert amz_date is not None
    claim = _Claim(key_id, date, region, service,
                   _parse_signed_headers(fields["SignedHeaders"], error),
                   _parse_signature(fields["Signature"], error), amz_date)
    return claim, when


def _query_claim(pairs: list[tuple[str, str]]) -> tuple[_Claim, datetime, int]:
    error = MalformedAuthorizationError
    params: dict[str, str] = {}
    for key, value in pairs:
        params.setdefault(key, value)
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise error(f"unsupported X-Amz-Algorithm: {params.get('X-Amz-Algorithm')!r}")
    missing = [k for k in ("X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                           "X-Amz-SignedHeaders", "X-Amz-Signature") if k not in params]
    if missing:
        raise error(f"presigned query is missing {', '.join(missing)}")
    key_id, date, region, service = _parse_credential(params["X-Amz-Credential"], error)
    when = _parse_amz_date(params["X-Amz-Date"], error)
    try:
        expires = int(params["X-Amz-Expires"])
    except ValueError as exc:
        raise error(f"malformed X-Amz-Expires: {params['X-Amz-Expires']!r}") from exc
    if not 0 <= expires <= MAX_PRESIGNED_EXPIRES:
        raise error(f"X-Amz-Expires must be between 0 and {MAX_PRESIGNED_EXPIRES} seconds")
    claim = _Claim(key_id, date, region, service,
                   _parse_signed_headers(params["X-Amz-SignedHeaders"], error),
                   _parse_signature(params["X-Amz-Signature"], error), params["X-Amz-Date"])
    return claim, when, expires


def _declared_payload_hash(value: str | None) -> str:
    if value is None:
        raise MalformedAuthorizationError("missing X-Amz-Content-SHA256")
    if value in _DECLARED_CONSTANTS or _HEX_SHA256.match(value):
        return value
    raise MalformedAuthorizationError(f"invalid X-Amz-Content-SHA256: {value!r}")


# --- verification ---------------------------------------------------------------------
def verify_request(
    method: str,
    raw_path: str,
    query: QueryLike,
    headers: HeadersLike,
    secret_for: SecretLookup,
    *,
    now: datetime | None = None,
    payload_sha256: str | None = None,
    region: str | None = None,
    service: str | None = None,
) -> SignedRequest:
    """Verify a SigV4-signed request and describe it.

    Args:
        method: HTTP method.
        raw_path: The request path as sent, still percent-encoded
            (``/bucket/key%20with%20spaces``), without the query.
        query: The raw query string, or its percent-decoded ``(name, value)`` pairs
            in order (decode with :func:`parse_query`, not form decoding).
        headers: Request headers, a mapping or ``(name, value)`` pairs (repeated
            names are joined with ``,`` as SigV4 requires).
        secret_for: Returns the secret of an access key id; unknown keys return None
            or raise NotFoundError/KeyError.
        now: The current time (UTC); defaults to the clock.
        payload_sha256: The body's hex SHA-256, used only when a header-signed request
            has no ``X-Amz-Content-SHA256`` header (non-S3 SigV4 clients).
        region: The region the credential scope must name (None: any).
        service: The service the credential scope must name (None: any).

    Returns:
        The verified request.

    Raises:
        MalformedAuthorizationError: No or unparsable signature fields.
        WrongSigningScopeError: The credential scope names another region or service.
        RequestTimeTooSkewedError: Header form, date more than 15 minutes off.
        RequestExpiredError: Presigned form, expired or not valid yet.
        InvalidAccessKeyIdError: ``secret_for`` does not know the access key.
        HeadersNotSignedError: ``host`` or an ``x-amz-*`` header is not signed.
        SignatureMismatchError: The signature is wrong.
    """
    now = now or datetime.now(UTC)
    pairs = parse_query(query) if isinstance(query, str) else list(query)
    bag = _header_bag(headers)
    authorization = _first(bag, "authorization")
    presigned = authorization is None and any(k == "X-Amz-Algorithm" for k, _ in pairs)
    if presigned:
        claim, when, expires = _query_claim(pairs)
        if now > when + timedelta(seconds=expires):
            raise RequestExpiredError("Request has expired")
        if when > now + MAX_CLOCK_SKEW:
            raise RequestExpiredError("Request is not valid yet")
        payload_hash = _declared_payload_hash(
            dict(pairs).get("X-Amz-Content-Sha256", UNSIGNED_PAYLOAD))
    elif authorization is not None:
        claim, when = _header_claim(bag, authorization)
        if abs(now - when) > MAX_CLOCK_SKEW:
            raise RequestTimeTooSkewedError(
                "The difference between the request time and the server's time is too large")
        payload_hash = _declared_payload_hash(
            _first(bag, "x-amz-content-sha256") or payload_sha256)
    else:
        raise MalformedAuthorizationError("request is not signed with AWS Signature V4")
    if claim.amz_date[:8] != claim.date:
        raise MalformedAuthorizationError(
            f"credential scope date {claim.date} does not match request date {claim.amz_date}")
    _check_scope(claim, presigned, region, service)

    unsigned = sorted(name for name in bag
                      if (name.startswith("x-amz-") or name == "host")
                      and name not in claim.signed_headers)
    if unsigned:
        raise HeadersNotSignedError("There were headers present in the request which were "
                                    f"not signed: {', '.join(unsigned)}")

    try:
        secret = secret_for(claim.access_key_id)
    except (NotFoundError, KeyError):
        secret = None
    if secret is None:
        raise InvalidAccessKeyIdError(
            f"The AWS access key id you provided does not exist: {claim.access_key_id}")

    scope = credential_scope(claim.date, claim.region, claim.service)
    key = signing_key(secret, claim.date, claim.region, claim.service)
    headers_part = "\n".join([_canonical_headers(bag, claim.signed_headers),
                              ";".join(claim.signed_headers), payload_hash])
    for query_pairs in _query_readings(query, pairs):
        if presigned:
            query_pairs = [(k, v) for k, v in query_pairs if k != "X-Amz-Signature"]
        query_part = canonical_query(query_pairs)
        for uri in _canonical_uris(raw_path):
            canonical_request = f"{method.upper()}\n{uri}\n{query_part}\n{headers_part}"
            to_sign = string_to_sign(claim.amz_date, scope, canonical_request)
            if hmac.compare_digest(sign(key, to_sign), claim.signature):
                return SignedRequest(claim.access_key_id, presigned, payload_hash,
                                     claim.amz_date, scope, claim.signature, key)
    raise SignatureMismatchError(
        "The request signature we calculated does not match the signature you provided")


def _check_scope(claim: _Claim, presigned: bool, region: str | None,
                 service: str | None) -> None:
    """Refuse a credential scope for another region or service, in S3's words."""
    what = ("Error parsing the X-Amz-Credential parameter" if presigned
            else "The authorization header is malformed")
    expected_region = region or claim.region
    if service is not None and claim.service != service:
        raise WrongSigningScopeError(
            f"{what}; incorrect service '{claim.service}'. This endpoint belongs to "
            f"'{service}'.", expected_region)
    if region is not None and claim.region != region:
        raise WrongSigningScopeError(
            f"{what}; the region '{claim.region}' is wrong; expecting '{region}'", region)


def verify(
    method: str,
    raw_path: str,
    query: QueryLike,
    headers: HeadersLike,
    secret_for: SecretLookup,
    *,
    now: datetime | None = None,
    payload_sha256: str | None = None,
) -> str:
    """Verify a SigV4-signed request and return its access key id.

    See :func:`verify_request` for the arguments and errors.
    """
    return verify_request(method, raw_path, query, headers, secret_for, now=now,
                          payload_sha256=payload_sha256).access_key_id


# --- aws-chunked bodies -----------------------------------------------------------------
_MAX_CHUNK_HEADER = 4096


class AwsChunkedDecoder:
    """Decodes an ``aws-chunked`` body incrementally, verifying chunk signatures.

    Feed the body as it arrives; each call returns the payload bytes received so far,
    whatever the chunk sizes the client chose (a chunk is never held whole in memory).
    When the request declared ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD`` (or its
    ``-TRAILER`` variant), each chunk's signature, chained to the previous one from the
    request's seed signature, is verified as the chunk ends: a wrong one raises before
    any byte after that chunk is returned, and the consumer must not keep what it was
    given before (:class:`~lakefs_core.gateway.body.RequestBody` releases the last bytes
    only once the whole body is verified, so a store write aborts). Trailing headers
    (checksums) are collected in :attr:`trailers`; their own signature is not checked.
    Call :meth:`finish` at the end of the body.

    Args:
        signed: The verified request the body belongs to.

    Raises:
        SignatureMismatchError: A chunk's signature is missing or wrong.
        ValidationError: The body is not well-formed ``aws-chunked`` data.
    """

    def __init__(self, signed: SignedRequest) -> None:
        if not signed.streaming:
            raise ValidationError(f"payload {signed.payload_hash!r} is not aws-chunked")
        self._signed = signed
        self._verify = signed.payload_hash in _SIGNED_PAYLOADS
        self._previous = signed.signature
        self._buffer = bytearray()
        self._state = "header"
        self._remaining = 0
        self._chunk_signature: str | None = None
        self._chunk_hash = hashlib.sha256()
        self.trailers: dict[str, str] = {}
        self.decoded_length = 0

    @property
    def done(self) -> bool:
        """Whether the final chunk (and trailers) have been read."""
        return self._state == "done"

    def feed(self, data: bytes) -> bytes:
        """Consume body bytes; return the payload bytes they carried."""
        self._buffer += data
        out = bytearray()
        while True:
            if self._state == "header":
                line = self._take_line()
                if line is None:
                    break
                self._start_chunk(line)
            elif self._state == "data":
                take = min(self._remaining, len(self._buffer))
                data = bytes(self._buffer[:take])
                del self._buffer[:take]
                self._chunk_hash.update(data)
                self.decoded_length += take
                out += data
                self._remaining -= take
                if self._remaining:
                    break
                self._state = "data-end"
            elif self._state == "data-end":
                if len(self._buffer) < 2:
                    break
                if self._buffer[:2] != b"\r\n":
                    raise ValidationError("aws-chunked: chunk data not followed by CRLF")
                del self._buffer[:2]
                self._verify_chunk(self._chunk_hash.hexdigest())
                self._state = "header"
            elif self._state == "trailer":
                line = self._take_line()
                if line is None:
                    break
                if not line:
                    self._state = "done"
                    continue
                name, sep, value = line.partition(":")
                if not sep:
                    raise ValidationError(f"aws-chunked: malformed trailer {line!r}")
                self.trailers[name.strip().lower()] = value.strip()
            else:  # done
                if self._buffer:
                    raise ValidationError("aws-chunked: data after the final chunk")
                break
        return bytes(out)

    def finish(self) -> None:
        """Check that the body ended after its final chunk.

        Raises:
            ValidationError: The body is truncated.
        """
        if self._state != "done":
            raise ValidationError("aws-chunked: body ended before the final chunk")

    def _take_line(self) -> str | None:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > _MAX_CHUNK_HEADER:
                raise ValidationError("aws-chunked: chunk header too long")
            return None
        line = bytes(self._buffer[:end]).decode("ascii", errors="replace")
        del self._buffer[:end + 2]
        return line

    def _start_chunk(self, line: str) -> None:
        size_text, _, extension = line.partition(";")
        try:
            size = int(size_text.strip(), 16)
        except ValueError as exc:
            raise ValidationError(f"aws-chunked: malformed chunk size {size_text!r}") from exc
        if size < 0:
            raise ValidationError("aws-chunked: negative chunk size")
        self._chunk_signature = None
        name, _, value = extension.partition("=")
        if name.strip() == "chunk-signature" and _HEX_SHA256.match(value.strip()):
            self._chunk_signature = value.strip().lower()
        self._remaining = size
        self._chunk_hash = hashlib.sha256()
        if size == 0:
            self._verify_chunk(EMPTY_SHA256)
            # trailer lines (if any) follow; an empty line ends the body either way
            self._state = "trailer"
        else:
            self._state = "data"

    def _verify_chunk(self, data_sha256: str) -> None:
        if not self._verify:
            return
        if self._chunk_signature is None:
            raise SignatureMismatchError("aws-chunked: chunk without a signature")
        chunk_to_sign = "\n".join([
            "AWS4-HMAC-SHA256-PAYLOAD", self._signed.amz_date, self._signed.scope,
            self._previous, EMPTY_SHA256, data_sha256,
        ])
        expected = sign(self._signed.signing_key, chunk_to_sign)
        if not hmac.compare_digest(expected, self._chunk_signature):
            raise SignatureMismatchError("aws-chunked: chunk signature does not match")
        self._previous = expected


def decode_aws_chunked(body: bytes, signed: SignedRequest) -> bytes:
    """Decode (and verify) a whole ``aws-chunked`` body. See :class:`AwsChunkedDecoder`."""
    decoder = AwsChunkedDecoder(signed)
    data = decoder.feed(body)
    decoder.finish()
    return data
