"""Request payloads: decoded and verified while they stream in.

A request body reaches the gateway in one of three shapes, as its signature declares:
plain bytes whose SHA-256 was signed (``X-Amz-Content-SHA256: <hex>``), plain bytes
not hashed (``UNSIGNED-PAYLOAD``, presigned URLs), or ``aws-chunked`` framing
(``STREAMING-*``), with chunk signatures and/or a checksum trailer. :class:`RequestBody`
yields the payload bytes of any of them and checks, once the body has ended, every
digest the client stated: the signed SHA-256, ``Content-MD5``, ``x-amz-checksum-*``
(header or trailer; CRC32, SHA-1 and SHA-256 are verified) and
``x-amz-decoded-content-length``. A mismatch raises before the last chunk is handed
on, so a consumer writing the stream to the store aborts and nothing is stored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from lakefs_core.gateway.errors import S3Error
from lakefs_core.gateway.sigv4 import AwsChunkedDecoder, SignedRequest

#: returns the next raw body chunk and whether more follow
PullChunk = Callable[[], tuple[bytes, bool]]

_CHECKSUM_PREFIX = "x-amz-checksum-"


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


class _Crc32:
    def __init__(self) -> None:
        self._value = 0

    def update(self, data: bytes) -> None:
        self._value = zlib.crc32(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(4, "big")


_CHECKSUMS: dict[str, Callable[[], _Hasher]] = {
    "crc32": _Crc32,
    "sha1": hashlib.sha1,
    "sha256": hashlib.sha256,
}


class RequestBody:
    """The payload of one request, decoded and verified as it is read.

    Iterate it once (or call :meth:`read`). After the iteration ends, :attr:`size` and
    :attr:`md5` (when asked for) describe the payload.

    Args:
        pull: Returns the next raw chunk of the body and whether more follow.
        signed: The request's verified signature.
        headers: The request headers, lower-case names.
        want_md5: Compute the payload's MD5 (for part ETags).

    Raises (while iterating):
        S3Error: ``XAmzContentSHA256Mismatch``, ``BadDigest``, ``IncompleteBody``.
        SignatureMismatchError: An ``aws-chunked`` chunk signature is wrong.
        ValidationError: Malformed ``aws-chunked`` framing.
    """

    def __init__(self, pull: PullChunk, signed: SignedRequest, headers: Mapping[str, str],
                 *, want_md5: bool = False) -> None:
        self._pull = pull
        self._signed = signed
        self._headers = headers
        self._decoder = AwsChunkedDecoder(signed) if signed.streaming else None
        self._sha256 = hashlib.sha256() if signed.payload_digest else None
        content_md5 = headers.get("content-md5")
        self._md5 = hashlib.md5() if want_md5 or content_md5 else None
        self._content_md5 = content_md5
        self._checksums = self._checksums_to_compute()
        self._consumed = False
        self.size = 0
        self.md5: str | None = None

    def _checksums_to_compute(self) -> dict[str, _Hasher]:
        names = [n[len(_CHECKSUM_PREFIX):] for n in self._headers
                 if n.startswith(_CHECKSUM_PREFIX) and n != "x-amz-checksum-type"]
        trailer = self._headers.get("x-amz-trailer", "").strip().lower()
        if trailer.startswith(_CHECKSUM_PREFIX):
            names.append(trailer[len(_CHECKSUM_PREFIX):])
        return {name: _CHECKSUMS[name]() for name in names if name in _CHECKSUMS}

    def __iter__(self) -> Iterator[bytes]:
        if self._consumed:
            raise RuntimeError("a request body can be read once")
        self._consumed = True
        pending = b""
        more = True
        while more:
            raw, more = self._pull()
            if self._sha256 is not None:
                self._sha256.update(raw)
            data = self._decoder.feed(raw) if self._decoder is not None else raw
            if data:
                self._account(data)
                # hold one chunk back: the last one is released only once verified
                if pending:
                    yield pending
                pending = data
        self._verify()
        if pending:
            yield pending

    def read(self, limit: int) -> bytes:
        """The whole payload (for small XML bodies).

        Raises:
            S3Error: ``MaxMessageLengthExceeded`` past ``limit`` bytes.
        """
        out = bytearray()
        for chunk in self:
            out += chunk
            if len(out) > limit:
                raise S3Error("MaxMessageLengthExceeded", "the request body is too large")
        return bytes(out)

    def _account(self, data: bytes) -> None:
        self.size += len(data)
        if self._md5 is not None:
            self._md5.update(data)
        for hasher in self._checksums.values():
            hasher.update(data)

    def _verify(self) -> None:
        if self._sha256 is not None and self._sha256.hexdigest() != self._signed.payload_digest:
            raise S3Error("XAmzContentSHA256Mismatch",
                          "The provided 'x-amz-content-sha256' header does not match what "
                          "was computed.")
        trailers: Mapping[str, str] = {}
        if self._decoder is not None:
            self._decoder.finish()
            trailers = self._decoder.trailers
            declared = self._headers.get("x-amz-decoded-content-length")
            if declared is not None and declared.strip() != str(self.size):
                raise S3Error("IncompleteBody",
                              f"x-amz-decoded-content-length is {declared}, the body "
                              f"carried {self.size} bytes")
        if self._md5 is not None:
            self.md5 = self._md5.hexdigest()
            if self._content_md5 is not None:
                _compare_digest("Content-MD5", self._content_md5, self._md5.digest())
        for name, hasher in self._checksums.items():
            header = _CHECKSUM_PREFIX + name
            stated = self._headers.get(header) or trailers.get(header)
            if stated is None:
                raise S3Error("InvalidRequest", f"the trailer {header} is missing")
            _compare_digest(header, stated, hasher.digest())


def _compare_digest(name: str, stated: str, computed: bytes) -> None:
    try:
        expected = base64.b64decode(stated.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise S3Error("InvalidDigest", f"the {name} you specified is not valid") from None
    if expected != computed:
        raise S3Error("BadDigest",
                      f"The {name} you specified did not match the calculated checksum.")
