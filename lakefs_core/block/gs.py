"""Google Cloud Storage blockstore on google-cloud-storage: ``gs://bucket/key``.

One client is built per store and shared by every thread (its HTTP session pools
connections). Writes of bytes, and streams that end within one chunk, are one upload
request. Longer streams go as one *resumable upload*, ``upload_chunk_size`` bytes per
request: the object appears whole when the last chunk is sent and never before, a
failed stream leaves nothing, and a writer holds at most one chunk in memory. (Writing
the chunks as separate objects and composing them would show the parts in listings,
cap a compose at 32 sources, and leave the object without an MD5.)

Pre-signed multipart uploads, whose parts clients write in any order and in
parallel through signed URLs, are the other way round: each part is an object of its
own (beside the target, under ``<key>.upload-<id>/``), and completing the upload
*composes* them (32 at a time, in a tree) into the target, then deletes them.

The etag is the object's MD5 in hex, as S3 gives for objects written in one request;
a composed object has no MD5, and gets ``<crc32c in hex>-<component count>`` instead.
Pre-signed URLs are V4 signed URLs, signed with a service-account key.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import requests
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.auth import credentials as auth_credentials
from google.auth import exceptions as auth_exceptions
from google.cloud import storage
from google.cloud.storage import exceptions as storage_exceptions
from google.cloud.storage.fileio import BlobReader, BlobWriter

from lakefs_core.block.base import (
    BlockStore,
    ObjectStat,
    PresignedURL,
    PresignMode,
    PresignSupport,
    check_byte_range,
    split_bucket_address,
)
from lakefs_core.block.config import BlockstoreConfig, GSConfig
from lakefs_core.errors import NotFoundError, ObjectNotFoundError, StorageError, ValidationError

log = logging.getLogger("lakefs_core.block.gs")

SCHEME = "gs://"
#: what the Cloud Storage API needs to read and write objects
_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)
#: the host signed URLs name when no endpoint is configured
_PUBLIC_ENDPOINT = "https://storage.googleapis.com"
#: a stream is read from the store in requests of at least this many bytes
_MIN_READ_REQUEST = 8 << 20
#: part numbers of a multipart upload run from 1 to this (S3's limit, which clients know)
_MAX_PARTS = 10_000
#: Cloud Storage composes at most this many objects in one request
_COMPOSE_FAN_IN = 32
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}\Z")
_ERRORS = (
    api_exceptions.GoogleAPIError,
    auth_exceptions.GoogleAuthError,
    requests.RequestException,
    storage_exceptions.InvalidResponse,
    storage_exceptions.DataCorruption,
)


def split_address(address: str, *, key_required: bool = True) -> tuple[str, str]:
    """Split ``gs://bucket/key`` into ``(bucket, key)``.

    Raises:
        ValidationError: not a gs address, no bucket, or (if ``key_required``) no key.
    """
    return split_bucket_address(address, "gs", key_required=key_required)


def _load_credentials(config: GSConfig) -> tuple[auth_credentials.Credentials, str | None]:
    """The configured service-account key (file, else JSON), else the default chain;
    and the project they belong to."""
    import google.auth
    from google.oauth2 import service_account

    try:
        if config.credentials_file:
            key = service_account.Credentials.from_service_account_file(
                config.credentials_file, scopes=_SCOPES)
            return key, key.project_id
        if config.credentials_json is not None:
            info = json.loads(config.credentials_json.get_secret_value())
            key = service_account.Credentials.from_service_account_info(info, scopes=_SCOPES)
            return key, key.project_id
        creds, project = google.auth.default(scopes=_SCOPES)
    except (auth_exceptions.GoogleAuthError, ValueError, OSError) as e:
        raise StorageError(f"blockstore.gs: cannot load credentials: {e}") from e
    return creds, project


class GSBlockStore(BlockStore):
    """Objects in Cloud Storage buckets, addressed as ``gs://bucket/key``.

    Args:
        config: credentials, endpoint and pre-signing settings.

    Raises:
        StorageError: the credentials cannot be loaded.
    """

    type = "gs"
    scheme = "gs"

    def __init__(self, config: GSConfig | None = None) -> None:
        self.config = config or GSConfig()
        configured = (self.config.credentials_file is not None
                      or self.config.credentials_json is not None)
        creds: auth_credentials.Credentials | None = None
        project: str | None = None
        if configured or not self.config.anonymous:
            creds, project = _load_credentials(self.config)
        #: signs pre-signed URLs: a service-account key, when the credentials are one
        self._signer = creds if isinstance(creds, auth_credentials.Signing) else None
        if self.config.anonymous or creds is None:
            creds = auth_credentials.AnonymousCredentials()
        options = ClientOptions(api_endpoint=self.config.endpoint) if self.config.endpoint else None
        # the project only matters for bucket administration (tests create buckets)
        self._client = storage.Client(project=project or "lakefs", credentials=creds,
                                      client_options=options)
        self._signing_endpoint = (self.config.endpoint or _PUBLIC_ENDPOINT).rstrip("/")
        key = self.config.server_side_encryption_customer_supplied
        self._blob_options: dict[str, Any] = {
            "encryption_key": bytes.fromhex(key.get_secret_value()) if key else None,
            "kms_key_name": self.config.server_side_encryption_kms_key_id or None,
        }

    @property
    def client(self) -> storage.Client:
        """The shared google-cloud-storage client (for administration, such as buckets)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def _blob(self, bucket: str, key: str, **options: Any) -> storage.Blob:
        return self._client.bucket(bucket).blob(key, **self._blob_options, **options)

    # --- writes ---------------------------------------------------------------
    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        bucket, key = split_address(address)
        if isinstance(data, bytes | bytearray | memoryview):
            return self._put_single(address, bucket, key, bytes(data))
        chunk_size = self.config.upload_chunk_size
        chunks = iter(data)
        held: list[bytes] = []
        size = 0
        for chunk in chunks:
            held.append(chunk)
            size += len(chunk)
            if size > chunk_size:
                return self._put_resumable(address, bucket, key, held, chunks)
        return self._put_single(address, bucket, key, b"".join(held))

    def _put_single(self, address: str, bucket: str, key: str, body: bytes) -> ObjectStat:
        blob = self._blob(bucket, key)
        try:
            blob.upload_from_string(body, content_type="application/octet-stream")
        except _ERRORS as e:
            _raise_storage(e, "put", address)
        return _stat(address, blob)

    def _put_resumable(self, address: str, bucket: str, key: str, held: list[bytes],
                       rest: Iterator[bytes]) -> ObjectStat:
        blob = self._blob(bucket, key)
        writer = BlobWriter(blob, chunk_size=self.config.upload_chunk_size,
                            ignore_flush=True, content_type="application/octet-stream")
        size = 0
        try:
            for chunk in itertools.chain(held, rest):
                writer.write(chunk)
                size += len(chunk)
            writer.close()
        except BaseException as e:
            # an unfinished resumable upload creates no object; cancel it all the same
            # (the original failure is the one worth reporting)
            with contextlib.suppress(*_ERRORS):
                _cancel(writer)
            if isinstance(e, _ERRORS):
                _raise_storage(e, "put", address)
            raise
        stat = self.stat(address)
        if stat.size != size:
            raise StorageError(f"gs put {address}: wrote {size} bytes, store has {stat.size}")
        return stat

    def copy(self, src: str, dst: str) -> ObjectStat:
        """Copy server-side with ``rewrite`` (any size, across buckets and locations)."""
        src_bucket, src_key = split_address(src)
        dst_bucket, dst_key = split_address(dst)
        source = self._blob(src_bucket, src_key)
        target = self._blob(dst_bucket, dst_key)
        try:
            token, _, _ = target.rewrite(source)
            while token is not None:
                token, _, _ = target.rewrite(source, token=token)
        except api_exceptions.NotFound as e:
            raise ObjectNotFoundError(f"object not found: {src}") from e
        except _ERRORS as e:
            _raise_storage(e, "copy", f"{src} -> {dst}")
        return _stat(dst, target)

    def delete(self, address: str) -> None:
        bucket, key = split_address(address)
        try:
            self._blob(bucket, key).delete()
        except api_exceptions.NotFound:
            return
        except _ERRORS as e:
            _raise_storage(e, "delete", address)

    # --- reads ----------------------------------------------------------------
    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        bucket, key = split_address(address)
        blob = self._blob(bucket, key)
        try:
            if byte_range is None:
                data: bytes = blob.download_as_bytes(raw_download=True)
                return data
            first, last = check_byte_range(byte_range)
            data = blob.download_as_bytes(start=first, end=last, raw_download=True,
                                          checksum=None)
            return data
        except api_exceptions.RequestRangeNotSatisfiable:
            # the range starts at or past the end: nothing to return (as the other
            # stores do); callers that need a 416 compare with stat()
            self.stat(address)
            return b""
        except _ERRORS as e:
            _raise_storage(e, "get", address)

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        stat_blob = self._get_blob(address)
        size = int(stat_blob.size or 0)
        # every read names the generation found here: an overwrite mid-stream fails
        # the stream instead of mixing two versions
        pinned = self._blob(stat_blob.bucket.name, stat_blob.name,
                            generation=stat_blob.generation)
        return self._chunks(address, pinned, size, chunk_size)

    @staticmethod
    def _chunks(address: str, blob: storage.Blob, size: int,
                chunk_size: int) -> Iterator[bytes]:
        reader = BlobReader(blob, chunk_size=max(chunk_size, _MIN_READ_REQUEST),
                            raw_download=True)
        sent = 0
        try:
            while sent < size:
                chunk = reader.read(min(chunk_size, size - sent))
                if not chunk:
                    raise StorageError(f"gs get {address}: object ended at {sent} of "
                                       f"{size} bytes")
                sent += len(chunk)
                yield chunk
        except _ERRORS as e:
            _raise_storage(e, "get", address)
        finally:
            reader.close()

    def _get_blob(self, address: str) -> storage.Blob:
        bucket, key = split_address(address)
        try:
            blob = self._client.bucket(bucket).get_blob(key, **self._blob_options)
        except _ERRORS as e:
            _raise_storage(e, "stat", address)
        if blob is None:
            raise ObjectNotFoundError(f"object not found: {address}")
        return blob

    def stat(self, address: str) -> ObjectStat:
        return _stat(address, self._get_blob(address))

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Objects under ``prefix`` (``gs://bucket/some/prefix``), in name order, page by page."""
        bucket, key_prefix = split_address(prefix, key_required=False)
        base = SCHEME + bucket + "/"
        try:
            blobs = self._client.list_blobs(bucket, prefix=key_prefix or None,
                                            page_size=self.config.list_page_size)
            for blob in blobs:
                yield _stat(base + blob.name, blob)
        except _ERRORS as e:
            _raise_storage(e, "list", prefix)

    # --- pre-signed URLs ---------------------------------------------------------------
    def presign_support(self) -> PresignSupport:
        return PresignSupport.from_flags(self.config, signer=self._signer is not None)

    def presign(self, address: str, mode: PresignMode) -> PresignedURL:
        if not self.presign_support().pre_sign_support:
            raise self._not_supported()
        bucket, key = split_address(address)
        expiry = self.config.pre_signed_expiry
        now = datetime.now(UTC).replace(microsecond=0)
        try:
            url: str = self._client.bucket(bucket).blob(key).generate_signed_url(
                version="v4", expiration=expiry, method=mode.value, credentials=self._signer,
                api_access_endpoint=self._signing_endpoint)
        except (*_ERRORS, ValueError, AttributeError) as e:
            raise StorageError(f"gs presign {address}: {e}") from e
        return PresignedURL(url=url, expiry=int((now + expiry).timestamp()))

    # --- pre-signed multipart uploads: parts as objects, composed at the end -----------
    def _upload_prefix(self, key: str, upload_id: str) -> str:
        self._check_multipart()
        if not _UPLOAD_ID.match(upload_id):
            raise NotFoundError(f"multipart upload {upload_id!r} not found")
        return f"{key}.upload-{upload_id}/"

    def _check_multipart(self) -> None:
        if not self.presign_support().pre_sign_multipart_upload:
            raise self._not_supported()

    def _upload_objects(self, bucket: str, prefix: str, upload_id: str) -> dict[str, Any]:
        """The objects of an upload by name (its marker, parts, composed levels).

        Raises:
            NotFoundError: no such upload (its marker is gone: completed or aborted).
        """
        try:
            found = {b.name: b for b in self._client.list_blobs(bucket, prefix=prefix)}
        except _ERRORS as e:
            _raise_storage(e, "list multipart upload", f"gs://{bucket}/{prefix}")
        if prefix + "upload" not in found:
            raise NotFoundError(f"multipart upload {upload_id!r} not found")
        return found

    def create_multipart_upload(self, address: str) -> str:
        bucket, key = split_address(address)
        upload_id = uuid.uuid4().hex
        # an empty marker says the upload exists (listing parts alone cannot tell an
        # upload with none yet from no upload)
        marker = self._blob(bucket, self._upload_prefix(key, upload_id) + "upload")
        try:
            marker.upload_from_string(b"", content_type="application/octet-stream")
        except _ERRORS as e:
            _raise_storage(e, "create multipart upload", address)
        return upload_id

    def presign_upload_part(self, address: str, upload_id: str, part_number: int
                            ) -> PresignedURL:
        bucket, key = split_address(address)
        prefix = self._upload_prefix(key, upload_id)
        return self.presign(f"{SCHEME}{bucket}/{prefix}{_part_name(part_number)}",
                            PresignMode.WRITE)

    def upload_part_copy(self, address: str, upload_id: str, part_number: int,
                         source: str, byte_range: tuple[int, int] | None = None) -> str:
        bucket, key = split_address(address)
        prefix = self._upload_prefix(key, upload_id)
        part = f"{SCHEME}{bucket}/{prefix}{_part_name(part_number)}"
        self._upload_objects(bucket, prefix, upload_id)
        if byte_range is None:
            return self.copy(source, part).etag
        first, last = check_byte_range(byte_range)
        size = self.stat(source).size
        if first >= size:
            raise ValidationError(f"copy part: range {byte_range!r} starts past the end "
                                  f"of {source} ({size} bytes)")
        last = min(last, size - 1)
        step = self.config.upload_chunk_size
        pieces = (self.get(source, (at, min(at + step, last + 1) - 1))
                  for at in range(first, last + 1, step))
        return self.put(part, pieces).etag

    def complete_multipart_upload(self, address: str, upload_id: str,
                                  parts: Sequence[tuple[int, str]]) -> ObjectStat:
        bucket, key = split_address(address)
        prefix = self._upload_prefix(key, upload_id)
        found = self._upload_objects(bucket, prefix, upload_id)
        numbers = [number for number, _ in parts]
        if not numbers or numbers != sorted(set(numbers)):
            raise ValidationError("complete multipart upload: InvalidPartOrder: parts must "
                                  "be listed once each, in ascending order")
        sources = []
        for number, etag in parts:
            blob = found.get(prefix + _part_name(number))
            if blob is None or _etag(blob) != etag.strip('"'):
                raise ValidationError(f"complete multipart upload: InvalidPart: part {number} "
                                      f"was not uploaded with etag {etag}")
            sources.append(blob)
        try:
            target = self._compose(bucket, key, prefix, sources)
        except _ERRORS as e:
            _raise_storage(e, "complete multipart upload", address)
        self._discard(bucket, prefix, upload_id)
        return _stat(address, target)

    def _compose(self, bucket: str, key: str, prefix: str,
                 sources: Sequence[storage.Blob]) -> storage.Blob:
        level = 0
        while len(sources) > _COMPOSE_FAN_IN:
            composed = []
            for i in range(0, len(sources), _COMPOSE_FAN_IN):
                step = self._blob(bucket, f"{prefix}composed-{level}-{i:05d}")
                step.content_type = "application/octet-stream"
                step.compose(sources[i:i + _COMPOSE_FAN_IN])
                composed.append(step)
            sources, level = composed, level + 1
        target = self._blob(bucket, key)
        target.content_type = "application/octet-stream"
        target.compose(sources)
        return target

    def _discard(self, bucket: str, prefix: str, upload_id: str) -> None:
        """Delete every object of an upload; what cannot be deleted is logged, not
        raised (the upload itself has succeeded or been given up)."""
        try:
            for blob in self._client.list_blobs(bucket, prefix=prefix):
                with contextlib.suppress(api_exceptions.NotFound):
                    blob.delete()
        except _ERRORS as e:
            log.warning("multipart upload %s: cannot delete its parts under gs://%s/%s: %s",
                        upload_id, bucket, prefix, e)

    def abort_multipart_upload(self, address: str, upload_id: str) -> None:
        bucket, key = split_address(address)
        prefix = self._upload_prefix(key, upload_id)
        self._upload_objects(bucket, prefix, upload_id)
        self._discard(bucket, prefix, upload_id)


def from_config(config: BlockstoreConfig) -> GSBlockStore:
    """Build a Cloud Storage store from a ``blockstore`` section of type ``gs``."""
    return GSBlockStore(config.gs or GSConfig())


def _part_name(part_number: int) -> str:
    if not 1 <= part_number <= _MAX_PARTS:
        raise ValidationError(f"part number must be between 1 and {_MAX_PARTS}")
    return f"part-{part_number:05d}"


def _cancel(writer: BlobWriter) -> None:
    """Cancel a writer's resumable upload, and make sure it is never completed.

    A ``BlobWriter`` left open completes its upload with what it holds when it is
    garbage-collected (``io`` objects close themselves), which would publish a
    truncated object: ``terminate`` closes it without sending anything. It also sends
    a ``DELETE``, but to the URL that started the session, which cancels nothing; the
    session URI itself gets one first (Cloud Storage answers 499).
    """
    started = getattr(writer, "_upload_and_transport", None)
    try:
        if started is not None and started[0].resumable_url:
            upload, transport = started
            transport.delete(upload.resumable_url, timeout=30)
    finally:
        writer.terminate()


def _etag(blob: storage.Blob) -> str:
    if blob.md5_hash:
        return base64.b64decode(blob.md5_hash).hex()
    crc = base64.b64decode(blob.crc32c or "").hex()
    return f"{crc}-{blob.component_count or 1}"


def _stat(address: str, blob: storage.Blob) -> ObjectStat:
    updated = blob.updated
    return ObjectStat(address=address, size=int(blob.size or 0), etag=_etag(blob),
                      mtime=updated.timestamp() if updated is not None else 0.0)


def _raise_storage(e: Exception, op: str, address: str) -> NoReturn:
    # reading an object of a missing bucket finds no object; writing or listing there
    # is a configuration problem and stays a StorageError
    if isinstance(e, api_exceptions.NotFound) and op in ("get", "stat"):
        raise ObjectNotFoundError(f"object not found: {address}") from e
    raise StorageError(f"gs {op} {address}: {type(e).__name__}: {e}") from e
