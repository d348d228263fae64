"""Azure Blob Storage blockstore on ``azure-storage-blob``: one storage account.

Addresses are the blobs' own URLs: ``https://<account>.<domain>/<container>/<blob>``,
or with ``test_endpoint_url`` (an emulator such as Azurite)
``<test_endpoint_url>/<account>/<container>/<blob>``. One ``BlobServiceClient`` is
built per store and shared by every thread (the SDK's clients are thread-safe).

Every blob written here has its content's MD5 as its ``Content-MD5`` property (Azure
computes it for a single-request write; a streaming write computes it as it goes),
and the etag this store reports is that MD5 (hex), as for local objects and
single-request S3 writes; a blob written by someone else without one reports its
Azure ETag. A
streaming write is staged block by block and becomes visible, whole, when its block
list is committed: the writer holds at most one block in memory.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.storage.blob import (
    BlobProperties,
    BlobSasPermissions,
    BlobServiceClient,
    ContentSettings,
    generate_blob_sas,
)
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_exponential

from lakefs_core.block.base import (
    BlockStore,
    ObjectStat,
    PresignedURL,
    PresignMode,
    PresignSupport,
    stream_parts,
)
from lakefs_core.block.config import AzureConfig, BlockstoreConfig
from lakefs_core.errors import ObjectNotFoundError, StorageError, ValidationError

#: Azure caps a block blob at this many committed blocks
_MAX_BLOCKS = 50_000
#: the block size doubles after every this many blocks, so a stream of any size fits
_BLOCKS_PER_SIZE_STEP = 5_000
#: what each ranged GET of a streamed read fetches (the SDK's first and later chunks)
_DOWNLOAD_CHUNK = 4 << 20
#: a server-side copy that Azure runs asynchronously is waited for this long
_COPY_TIMEOUT_SECONDS = 600.0
#: error codes that mean "no such blob" when reading
_BLOB_NOT_FOUND = frozenset({"BlobNotFound", "ContainerNotFound", "CannotVerifyCopySource"})
_CONTAINER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]\Z")
#: a SAS becomes valid this long before it was made (the clocks of client and Azure differ)
_CLOCK_SKEW = timedelta(minutes=5)


class AzureBlobStore(BlockStore):
    """Blobs of one Azure storage account, addressed by their URLs.

    Args:
        config: the account, its key and the endpoint.

    Raises:
        StorageError: no account or no key configured.
    """

    type = "azure"

    def __init__(self, config: AzureConfig) -> None:
        self.config = config
        account, key = config.storage_account, config.storage_access_key
        if not account:
            raise StorageError("blockstore.azure.storage_account is required")
        if not key:
            raise StorageError(
                "blockstore.azure.storage_access_key is required (this server signs "
                "requests and pre-signed URLs with the account's shared key)")
        self.account = account
        self._key = key
        if config.test_endpoint_url:
            account_url = f"{config.test_endpoint_url}/{account}"
        else:
            account_url = f"https://{account}.{config.domain}"
        self.scheme = account_url.split("://", 1)[0]
        #: every address of this store starts with this (``<account url>/``)
        self.base = account_url + "/"
        timeout = int(config.try_timeout.total_seconds())
        self._service = BlobServiceClient(
            account_url, credential={"account_name": account, "account_key": key},
            retry_total=config.max_retries, read_timeout=timeout,
            max_single_get_size=_DOWNLOAD_CHUNK, max_chunk_get_size=_DOWNLOAD_CHUNK,
            max_single_put_size=config.upload_block_size,
            max_block_size=config.upload_block_size)

    @property
    def service(self) -> BlobServiceClient:
        """The SDK client (for tests and tools that create containers)."""
        return self._service

    def close(self) -> None:
        self._service.close()

    # --- addresses --------------------------------------------------------------
    def split(self, address: str, *, blob_required: bool = True) -> tuple[str, str]:
        """``(container, blob name)`` of an address of this store's account.

        Raises:
            ValidationError: not an address of this account, no container, or (if
                ``blob_required``) no blob name.
        """
        if not isinstance(address, str) or not address.startswith(self.base):
            raise ValidationError(
                f"not an address of azure storage account {self.account!r}: {address!r} "
                f"(expected {self.base}<container>/<blob>)")
        container, _, name = address[len(self.base):].partition("/")
        if not container:
            raise ValidationError(f"azure address has no container: {address!r}")
        if blob_required and not name:
            raise ValidationError(f"azure address has no blob name: {address!r}")
        return container, name

    def check_namespace(self, namespace: str) -> None:
        container, _ = self.split(namespace.rstrip("/"), blob_required=False)
        if not _CONTAINER_NAME.match(container) or "--" in container:
            raise ValidationError(
                f"storage namespace {namespace!r}: {container!r} is not a valid Azure "
                "container name (3-63 lowercase letters, digits and single hyphens)")

    def _blob(self, address: str) -> Any:
        container, name = self.split(address)
        return self._service.get_blob_client(container, name)

    # --- writes -------------------------------------------------------------------
    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        blob = self._blob(address)
        if isinstance(data, bytes | bytearray | memoryview):
            data = bytes(data)
            if len(data) <= self.config.upload_block_size:
                return self._put_single(address, blob, data)
            data = [data]  # staged in blocks, as a stream is: the MD5 is computed here
        blocks = stream_parts(data, self._block_size)
        first, last = next(blocks)
        if last:
            return self._put_single(address, blob, first)
        return self._put_blocks(address, blob,
                                itertools.chain([first], (block for block, _ in blocks)))

    def _block_size(self, index: int) -> int:
        # growing the size keeps a stream of any length within the 50,000-block cap
        return self.config.upload_block_size << (index // _BLOCKS_PER_SIZE_STEP)

    def _put_single(self, address: str, blob: Any, body: bytes) -> ObjectStat:
        # Put Blob stores (and answers) the MD5 Azure computes of the body itself
        try:
            resp = blob.upload_blob(body, overwrite=True)
        except AzureError as e:
            _raise_storage(e, "put", address, read=False)
        md5 = resp.get("content_md5")
        etag = bytes(md5).hex() if md5 else str(resp.get("etag", "")).strip('"')
        return ObjectStat(address=address, size=len(body), etag=etag,
                          mtime=_mtime(resp.get("last_modified")))

    def _put_blocks(self, address: str, blob: Any, bodies: Iterator[bytes]) -> ObjectStat:
        # ids are unique to this write: a concurrent writer of the same blob stages its
        # own blocks, and the last commit wins whole
        upload = uuid.uuid4().hex
        block_ids: list[str] = []
        digest = hashlib.md5(usedforsecurity=False)
        size = 0
        try:
            for number, body in enumerate(bodies):
                if number >= _MAX_BLOCKS:
                    raise StorageError(
                        f"azure put {address}: stream needs more than {_MAX_BLOCKS} blocks")
                block_id = base64.b64encode(f"{upload}-{number:06d}".encode()).decode()
                blob.stage_block(block_id, body)
                block_ids.append(block_id)
                digest.update(body)
                size += len(body)
            # staged blocks stay invisible (and are discarded by Azure) until committed
            resp = blob.commit_block_list(
                block_ids, content_settings=ContentSettings(content_md5=bytearray(digest.digest())))
        except AzureError as e:
            _raise_storage(e, "put", address, read=False)
        return ObjectStat(address=address, size=size, etag=digest.hexdigest(),
                          mtime=_mtime(resp.get("last_modified")))

    def copy(self, src: str, dst: str) -> ObjectStat:
        """Server-side copy within the account; properties (the MD5) come along."""
        source = self._blob(src)
        target = self._blob(dst)
        try:
            started = target.start_copy_from_url(source.url)
            if started.get("copy_status") != "success":
                self._wait_for_copy(target, dst)
        except ResourceNotFoundError as e:
            missing_container = getattr(e, "error_code", None) == "ContainerNotFound"
            if missing_container and not self._container_exists(dst):
                _raise_storage(e, "copy", f"{src} -> {dst}", read=False)
            raise ObjectNotFoundError(f"object not found: {src}") from e
        except AzureError as e:
            _raise_storage(e, "copy", f"{src} -> {dst}", read=False)
        return self.stat(dst)

    def _container_exists(self, address: str) -> bool:
        container, _ = self.split(address)
        try:
            return bool(self._service.get_container_client(container).exists())
        except AzureError:
            return False

    @staticmethod
    def _wait_for_copy(target: Any, dst: str) -> None:
        retrying = Retrying(
            retry=retry_if_result(lambda status: status == "pending"),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            stop=stop_after_delay(_COPY_TIMEOUT_SECONDS),
            retry_error_callback=lambda state: "still pending after "
                                               f"{_COPY_TIMEOUT_SECONDS:.0f}s")
        status = retrying(lambda: target.get_blob_properties().copy.status)
        if status != "success":
            raise StorageError(f"azure copy to {dst}: copy ended {status}")

    def delete(self, address: str) -> None:
        blob = self._blob(address)
        try:
            blob.delete_blob()
        except ResourceNotFoundError:
            return
        except AzureError as e:
            _raise_storage(e, "delete", address, read=False)

    # --- reads ------------------------------------------------------------------
    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        blob = self._blob(address)
        offset: int | None = None
        length: int | None = None
        if byte_range is not None:
            first, last = _check_range(byte_range)
            offset, length = first, last - first + 1
        try:
            data: bytes = blob.download_blob(offset=offset, length=length).readall()
        except AzureError as e:
            _raise_storage(e, "get", address)
        return data

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        blob = self._blob(address)
        try:
            # the first ranged GET happens here: a missing blob fails now, not on
            # first iteration; later chunks are fetched as read, pinned to its ETag
            downloader = blob.download_blob()
        except AzureError as e:
            _raise_storage(e, "get", address)

        def chunks() -> Iterator[bytes]:
            try:
                for piece in downloader.chunks():
                    for start in range(0, len(piece), chunk_size):
                        yield piece[start:start + chunk_size]
            except AzureError as e:
                _raise_storage(e, "get", address)

        return chunks()

    def stat(self, address: str) -> ObjectStat:
        blob = self._blob(address)
        try:
            props: BlobProperties = blob.get_blob_properties()
        except AzureError as e:
            _raise_storage(e, "stat", address)
        return _stat(address, props)

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Blobs whose URL starts with ``prefix`` (``<account url>/<container>/<prefix>``),
        in name order, page by page."""
        container, name_prefix = self.split(prefix, blob_required=False)
        base = f"{self.base}{container}/"
        client = self._service.get_container_client(container)
        try:
            for props in client.list_blobs(name_starts_with=name_prefix or None):
                yield _stat(base + props.name, props)
        except AzureError as e:
            _raise_storage(e, "list", prefix, read=False)

    # --- pre-signed URLs (service SAS signed with the account key) --------------------
    def presign_support(self) -> PresignSupport:
        # as in lakeFS, Azure offers no pre-signed multipart upload
        return PresignSupport.from_flags(self.config, multipart=False)

    def presign(self, address: str, mode: PresignMode) -> PresignedURL:
        """A SAS URL for one blob: read (GET), or create/write (PUT, which must carry
        ``x-ms-blob-type: BlockBlob`` as every Azure client sends)."""
        if not self.presign_support().pre_sign_support:
            raise self._not_supported()
        container, name = self.split(address)
        now = datetime.now(UTC).replace(microsecond=0)
        expiry = now + self.config.pre_signed_expiry
        permission = (BlobSasPermissions(read=True) if mode is PresignMode.READ
                      else BlobSasPermissions(create=True, write=True))
        token = generate_blob_sas(self.account, container, name, account_key=self._key,
                                  permission=permission, expiry=expiry,
                                  start=now - _CLOCK_SKEW, protocol=None)
        url = self._service.get_blob_client(container, name).url
        return PresignedURL(url=f"{url}?{token}", expiry=int(expiry.timestamp()))


def from_config(config: BlockstoreConfig) -> AzureBlobStore:
    """Build an Azure store from a ``blockstore`` section of type ``azure``."""
    return AzureBlobStore(config.azure or AzureConfig())


def _mtime(value: datetime | None) -> float:
    return value.timestamp() if value is not None else time.time()


def _stat(address: str, props: BlobProperties) -> ObjectStat:
    md5 = props.content_settings.content_md5
    etag = bytes(md5).hex() if md5 else str(props.etag).strip('"')
    return ObjectStat(address=address, size=int(props.size), etag=etag,
                      mtime=_mtime(props.last_modified))


def _check_range(byte_range: tuple[int, int]) -> tuple[int, int]:
    first, last = byte_range
    if first < 0 or last < first:
        raise ValidationError(f"invalid byte range {byte_range!r}")
    return first, last


def _raise_storage(e: AzureError, op: str, address: str, *, read: bool = True) -> NoReturn:
    """Raise the typed error for an SDK failure: a missing blob (or, when reading, a
    missing container) is ObjectNotFoundError; anything else a StorageError."""
    code = getattr(e, "error_code", None) or ""
    if read and isinstance(e, ResourceNotFoundError) and (code in _BLOB_NOT_FOUND or not code):
        raise ObjectNotFoundError(f"object not found: {address}") from e
    status = e.status_code if isinstance(e, HttpResponseError) else None
    detail = f"{code or type(e).__name__}{f' ({status})' if status else ''}"
    message = str(e.message if hasattr(e, "message") else e).split("\n", 1)[0]
    raise StorageError(f"azure {op} {address}: {detail}: {message}") from e
