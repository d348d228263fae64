"""S3 blockstore on boto3: ``s3://bucket/key`` on AWS, MinIO or moto.

One botocore client is built per store and shared by every thread (botocore
clients are thread-safe; the connection pool is sized by ``max_pool_connections``).
Streaming writes are uploaded part by part, so a writer never holds more than one
part in memory. As on S3 itself, the etag is the content's MD5 for objects written
in one request (bytes, or a stream of at most one part) and ``<md5-of-part-md5s>-<n>``
for streams uploaded in ``n`` parts.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import boto3
import urllib3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakefs_core.block.base import (
    BlockStore,
    ObjectStat,
    PresignedURL,
    PresignMode,
    PresignSupport,
    check_byte_range,
    split_bucket_address,
    stream_parts,
)
from lakefs_core.block.config import BlockstoreConfig, S3Config
from lakefs_core.block.s3_requests import S3ObjectRequests, iter_response
from lakefs_core.errors import (
    NotFoundError,
    ObjectNotFoundError,
    StorageError,
    ValidationError,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SCHEME = "s3://"
#: S3 caps a multipart upload at this many parts
_MAX_PARTS = 10_000
#: part size doubles after every this many parts, so a stream of any size fits
_PARTS_PER_SIZE_STEP = 1_000
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
#: reading an object of a bucket that does not exist finds no object; writing or
#: listing there is a configuration problem and stays a StorageError
_READ_NOT_FOUND_CODES = _NOT_FOUND_CODES | {"NoSuchBucket"}


def split_address(address: str, *, key_required: bool = True) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``.

    Raises:
        ValidationError: not an s3 address, no bucket, or (if ``key_required``) no key.
    """
    return split_bucket_address(address, "s3", key_required=key_required)


def _etag(value: str) -> str:
    return value.strip('"')


class S3BlockStore(BlockStore):
    """Objects in S3 buckets, addressed as ``s3://bucket/key``.

    Args:
        config: endpoint, region, addressing style and credentials.
    """

    type = "s3"
    scheme = "s3"

    def __init__(self, config: S3Config | None = None) -> None:
        self.config = config or S3Config()
        creds = self.config.credentials
        session_args: dict[str, Any] = {"region_name": self.config.region}
        if creds is not None and creds.access_key_id and creds.secret_access_key:
            session_args.update(
                aws_access_key_id=creds.access_key_id,
                aws_secret_access_key=creds.secret_access_key,
                aws_session_token=creds.session_token or None,
            )
        elif self.config.profile:
            session_args["profile_name"] = self.config.profile
        botocore_config = Config(
            max_pool_connections=self.config.max_pool_connections,
            retries={"total_max_attempts": self.config.max_retries + 1, "mode": "standard"},
            s3={"addressing_style": "path" if self.config.force_path_style else "auto"},
        )
        try:
            session = boto3.session.Session(**session_args)
            self._client: S3Client = session.client(
                "s3", endpoint_url=self.config.endpoint or None, config=botocore_config
            )
            credentials = session.get_credentials()
        except BotoCoreError as e:
            raise StorageError(f"cannot build the s3 client: {e}") from e
        self._lean: S3ObjectRequests | None = None
        if self.config.lean_requests and credentials is not None:
            lean = S3ObjectRequests(
                self._client.meta.endpoint_url, self._client.meta.region_name or "us-east-1",
                credentials, path_style=self.config.force_path_style,
                max_connections=self.config.max_pool_connections)
            self._lean = lean if lean.usable else None
        # pre-signed URLs name the endpoint clients reach, signed with this store's keys
        self._presigner: S3ObjectRequests | None = None
        if credentials is not None:
            try:
                self._presigner = S3ObjectRequests(
                    self.config.pre_signed_endpoint or self._client.meta.endpoint_url,
                    self._client.meta.region_name or "us-east-1", credentials,
                    path_style=self.config.force_path_style, max_connections=1)
            except ValueError as e:
                raise StorageError(f"blockstore.s3.pre_signed_endpoint: {e}") from e

    @property
    def client(self) -> S3Client:
        """The shared boto3 S3 client (for administration, such as creating buckets)."""
        return self._client

    def close(self) -> None:
        self._client.close()
        if self._lean is not None:
            self._lean.close()
        if self._presigner is not None:
            self._presigner.close()

    # --- writes ---------------------------------------------------------------
    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        bucket, key = split_address(address)
        if isinstance(data, bytes | bytearray | memoryview):
            return self._put_single(address, bucket, key, bytes(data))
        parts = stream_parts(data, self._part_size)
        first, last = next(parts)
        if last:
            return self._put_single(address, bucket, key, first)
        return self._put_multipart(address, bucket, key,
                                   itertools.chain([first], (part for part, _ in parts)))

    def _part_size(self, index: int) -> int:
        # every part but the last must be >= 5 MiB; growing the size keeps a stream of
        # any length within the 10,000-part cap
        return self.config.multipart_part_size << (index // _PARTS_PER_SIZE_STEP)

    def _put_single(self, address: str, bucket: str, key: str, body: bytes) -> ObjectStat:
        if self._lean is not None and (etag := self._lean.put(bucket, key, body)) is not None:
            return ObjectStat(address=address, size=len(body), etag=etag, mtime=time.time())
        try:
            resp = self._client.put_object(Bucket=bucket, Key=key, Body=body)
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "put", address)
        return ObjectStat(address=address, size=len(body), etag=_etag(resp["ETag"]),
                          mtime=time.time())

    def _put_multipart(self, address: str, bucket: str, key: str,
                       bodies: Iterator[bytes]) -> ObjectStat:
        try:
            upload_id = self._client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "put", address)
        parts: list[dict[str, Any]] = []
        size = 0
        try:
            for number, body in enumerate(bodies, start=1):
                if number > _MAX_PARTS:
                    raise StorageError(
                        f"s3 put {address}: stream needs more than {_MAX_PARTS} parts")
                resp = self._client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                PartNumber=number, Body=body)
                parts.append({"PartNumber": number, "ETag": resp["ETag"]})
                size += len(body)
            self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException as e:
            # the original failure is the one worth reporting
            with contextlib.suppress(ClientError, BotoCoreError):
                self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            if isinstance(e, ClientError | BotoCoreError):
                _raise_storage(e, "put", address)
            raise
        stat = self.stat(address)
        if stat.size != size:
            raise StorageError(f"s3 put {address}: wrote {size} bytes, store has {stat.size}")
        return stat

    def copy(self, src: str, dst: str) -> ObjectStat:
        """Copy with one server-side ``CopyObject`` (objects up to 5 GiB)."""
        src_bucket, src_key = split_address(src)
        dst_bucket, dst_key = split_address(dst)
        try:
            self._client.copy_object(Bucket=dst_bucket, Key=dst_key,
                                     CopySource={"Bucket": src_bucket, "Key": src_key})
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "copy", f"{src} -> {dst}", not_found=src)
        return self.stat(dst)

    def delete(self, address: str) -> None:
        bucket, key = split_address(address)
        try:
            self._client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as e:
            if _code(e) in _NOT_FOUND_CODES:
                return
            _raise_storage(e, "delete", address)

    # --- reads ----------------------------------------------------------------
    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        bucket, key = split_address(address)
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        first: int | None = None
        last: int | None = None
        if byte_range is not None:
            first, last = check_byte_range(byte_range)
            args["Range"] = f"bytes={first}-{last}"
        data = self._lean.get(bucket, key, first, last) if self._lean is not None else None
        if data is not None:
            return data
        try:
            resp = self._client.get_object(**args)
            with resp["Body"] as body:
                return body.read()
        except (ClientError, BotoCoreError) as e:
            if byte_range is not None and _code(e) == "InvalidRange":
                # the range starts at or past the end: nothing to return (as the
                # local store does); callers that need a 416 compare with stat()
                self.stat(address)
                return b""
            _raise_storage(e, "get", address)

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        bucket, key = split_address(address)
        if self._lean is not None and (response := self._lean.open(bucket, key)) is not None:
            return self._lean_chunks(response, address, chunk_size)
        try:
            body = self._client.get_object(Bucket=bucket, Key=key)["Body"]
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "get", address)

        def chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(chunk_size)
            except (ClientError, BotoCoreError) as e:
                _raise_storage(e, "get", address)
            finally:
                body.close()

        return chunks()

    @staticmethod
    def _lean_chunks(response: Any, address: str, chunk_size: int) -> Iterator[bytes]:
        try:
            yield from iter_response(response, chunk_size)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise StorageError(f"s3 get {address}: {type(e).__name__}: {e}") from e

    def stat(self, address: str) -> ObjectStat:
        bucket, key = split_address(address)
        head = self._lean.head(bucket, key) if self._lean is not None else None
        if head is False:
            raise ObjectNotFoundError(f"object not found: {address}")
        if isinstance(head, tuple):
            size, etag, mtime = head
            return ObjectStat(address=address, size=size, etag=etag, mtime=mtime)
        try:
            resp = self._client.head_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "stat", address)
        return ObjectStat(address=address, size=resp["ContentLength"], etag=_etag(resp["ETag"]),
                          mtime=resp["LastModified"].timestamp())

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Objects under ``prefix`` (``s3://bucket/some/prefix``), in key order, page by page."""
        bucket, key_prefix = split_address(prefix, key_required=False)
        paginator = self._client.get_paginator("list_objects_v2")
        base = SCHEME + bucket + "/"
        try:
            pages = paginator.paginate(
                Bucket=bucket, Prefix=key_prefix,
                PaginationConfig={"PageSize": self.config.list_page_size},
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    yield ObjectStat(address=base + obj["Key"], size=obj["Size"],
                                     etag=_etag(obj["ETag"]),
                                     mtime=obj["LastModified"].timestamp())
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "list", prefix)


    # --- pre-signed URLs ---------------------------------------------------------------
    def presign_support(self) -> PresignSupport:
        return PresignSupport.from_flags(self.config, signer=self._presigner is not None)

    def presign(self, address: str, mode: PresignMode) -> PresignedURL:
        if not self.presign_support().pre_sign_support:
            raise self._not_supported()
        return self._presign(mode.value, address)

    def _presign(self, method: str, address: str,
                 query: dict[str, str] | None = None) -> PresignedURL:
        assert self._presigner is not None
        bucket, key = split_address(address)
        expires_in = int(self.config.pre_signed_expiry.total_seconds())
        now = datetime.now(UTC).replace(microsecond=0)
        try:
            url = self._presigner.presign(method, bucket, key, expires_in, now, query)
        except ValueError as e:
            raise StorageError(f"s3 presign {address}: {e}") from e
        return PresignedURL(url=url, expiry=int(now.timestamp()) + expires_in)

    def _check_multipart(self) -> None:
        if not self.presign_support().pre_sign_multipart_upload:
            raise self._not_supported()

    def create_multipart_upload(self, address: str) -> str:
        self._check_multipart()
        bucket, key = split_address(address)
        try:
            upload_id: str = self._client.create_multipart_upload(
                Bucket=bucket, Key=key)["UploadId"]
        except (ClientError, BotoCoreError) as e:
            _raise_storage(e, "create multipart upload", address)
        return upload_id

    def presign_upload_part(self, address: str, upload_id: str, part_number: int
                            ) -> PresignedURL:
        self._check_multipart()
        if not 1 <= part_number <= _MAX_PARTS:
            raise ValidationError(f"part number must be between 1 and {_MAX_PARTS}")
        return self._presign("PUT", address,
                             {"partNumber": str(part_number), "uploadId": upload_id})

    def upload_part_copy(self, address: str, upload_id: str, part_number: int,
                         source: str, byte_range: tuple[int, int] | None = None) -> str:
        self._check_multipart()
        if not 1 <= part_number <= _MAX_PARTS:
            raise ValidationError(f"part number must be between 1 and {_MAX_PARTS}")
        bucket, key = split_address(address)
        src_bucket, src_key = split_address(source)
        args: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": upload_id,
                                "PartNumber": part_number,
                                "CopySource": {"Bucket": src_bucket, "Key": src_key}}
        if byte_range is not None:
            first, last = check_byte_range(byte_range)
            args["CopySourceRange"] = f"bytes={first}-{last}"
        try:
            result = self._client.upload_part_copy(**args)["CopyPartResult"]
        except (ClientError, BotoCoreError) as e:
            _raise_multipart(e, "copy part of", address, upload_id)
        return _etag(str(result["ETag"]))

    def complete_multipart_upload(self, address: str, upload_id: str,
                                  parts: Sequence[tuple[int, str]]) -> ObjectStat:
        self._check_multipart()
        bucket, key = split_address(address)
        completed = [{"PartNumber": number, "ETag": f'"{_etag(etag)}"'}
                     for number, etag in parts]
        try:
            self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": completed})
        except (ClientError, BotoCoreError) as e:
            _raise_multipart(e, "complete", address, upload_id)
        return self.stat(address)

    def abort_multipart_upload(self, address: str, upload_id: str) -> None:
        self._check_multipart()
        bucket, key = split_address(address)
        try:
            self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except (ClientError, BotoCoreError) as e:
            _raise_multipart(e, "abort", address, upload_id)


def from_config(config: BlockstoreConfig) -> S3BlockStore:
    """Build an S3 store from a ``blockstore`` section of type ``s3``."""
    return S3BlockStore(config.s3 or S3Config())


def _code(e: Exception) -> str:
    if isinstance(e, ClientError):
        return str(e.response.get("Error", {}).get("Code", ""))
    return ""


def _raise_storage(e: ClientError | BotoCoreError, op: str, address: str,
                   not_found: str | None = None) -> NoReturn:
    code = _code(e)
    if code in (_READ_NOT_FOUND_CODES if op in ("get", "stat") else _NOT_FOUND_CODES):
        raise ObjectNotFoundError(f"object not found: {not_found or address}") from e
    raise StorageError(f"s3 {op} {address}: {code or type(e).__name__}: {e}") from e


#: what S3 answers when the parts named do not make the upload (the client's mistake)
_BAD_PARTS_CODES = frozenset({"InvalidPart", "InvalidPartOrder", "EntityTooSmall",
                              "MalformedXML", "InvalidRequest", "InvalidRange",
                              "InvalidArgument"})


def _raise_multipart(e: ClientError | BotoCoreError, op: str, address: str,
                     upload_id: str) -> NoReturn:
    code = _code(e)
    if code == "NoSuchUpload":
        raise NotFoundError(f"multipart upload {upload_id!r} not found") from e
    if isinstance(e, ClientError) and code in _BAD_PARTS_CODES:
        message = e.response.get("Error", {}).get("Message", "")
        raise ValidationError(f"{op} multipart upload: {code}: {message}") from e
    _raise_storage(e, f"{op} multipart upload", address)
