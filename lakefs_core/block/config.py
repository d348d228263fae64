"""Blockstore configuration as typed value objects, shaped like lakeFS's YAML.

Single store (``blockstore``)::

    blockstore:
      type: s3
      s3:
        region: us-east-1
        endpoint: http://minio.local
        force_path_style: true
        credentials: {access_key_id: ..., secret_access_key: ...}

Google Cloud Storage (``gs://bucket/prefix`` namespaces)::

    blockstore:
      type: gs
      gs:
        credentials_file: /etc/lakefs/gcs-key.json
        pre_signed_expiry: 15m

Several stores (``blockstores``, each repository bound to one by its storage id)::

    blockstores:
      signing: {secret_key: some-secret}
      stores:
        - id: minio-prod
          description: Primary on-prem MinIO
          backward_compatible: true
          type: s3
          s3: {force_path_style: true, endpoint: http://minio-prod.local}

This module imports no storage driver, so configuration can be parsed and checked
without boto3 installed.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

#: the longest a pre-signed URL may live (S3's own limit: 7 days)
MAX_PRESIGNED_EXPIRY = timedelta(days=7)
#: an Azure storage account name (Azurite's ``devstoreaccount1`` fits too)
_AZURE_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}\Z")


class BlockstoreType(StrEnum):
    """The storage types this server can drive (lakeFS's ``blockstore.type``)."""

    LOCAL = "local"
    S3 = "s3"
    AZURE = "azure"
    GS = "gs"


class _Section(BaseModel):
    # lakeFS configs carry options for features we do not implement (server-side
    # encryption, web identity, ...); accept them rather than refuse to start.
    model_config = ConfigDict(frozen=True, extra="ignore")


class LocalConfig(_Section):
    """``blockstore.local``: objects as files under ``path``.

    Attributes:
        path: the directory objects are stored under (the server resolves it to
            ``<data_dir>/blockstore`` when not set).
        import_enabled: allow zero-copy imports from local paths.
        import_hidden: accepted as lakeFS names it; not used.
        allowed_external_prefixes: directories outside ``path`` that imports may read
            (``local:///absolute/path``), as written and where symbolic links lead.
    """

    path: str = "~/lakefs/data/block"
    import_enabled: bool = False
    import_hidden: bool = False
    allowed_external_prefixes: tuple[str, ...] = ()


class S3Credentials(_Section):
    """``blockstore.s3.credentials``: static keys; omit to use the default AWS chain.

    Attributes:
        access_key_id: the AWS access key id.
        secret_access_key: its secret.
        session_token: a session token for temporary credentials.
    """

    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None


class S3Config(_Section):
    """``blockstore.s3``: any S3 endpoint (AWS, MinIO, moto).

    Attributes:
        region: the signing region (and the default bucket region).
        endpoint: an explicit endpoint URL; None means AWS's own.
        force_path_style: address buckets as ``endpoint/bucket`` (MinIO, moto).
        discover_bucket_region: accepted for compatibility; botocore already follows
            region redirects.
        profile: a named profile of the shared AWS config, used when no static
            credentials are given.
        credentials: static credentials; None (or empty keys) means the default chain.
        max_retries: retries of a failed request (botocore's standard retry mode).
        max_pool_connections: HTTP connections the shared client may keep open.
        multipart_part_size: streaming writes go multipart once they exceed one part;
            parts are this size (at least S3's 5 MiB minimum).
        list_page_size: keys asked for per ListObjectsV2 request.
        lean_requests: send the data path's GetObject and single-request PutObject as
            signed requests on a plain HTTP pool instead of through boto3's request
            pipeline (several milliseconds of CPU less per request); any answer but
            success is repeated through boto3. Off: every request goes through boto3.
        pre_signed_expiry: how long a pre-signed URL lives (``15m``; at most 7 days).
        pre_signed_endpoint: the endpoint pre-signed URLs name, when clients reach the
            store by another address than the server does (a VPC endpoint, say);
            None: ``endpoint``.
        disable_pre_signed: offer no pre-signed URLs (clients move data through the
            server).
        disable_pre_signed_ui: tell the web UI not to use pre-signed URLs (the
            default, as lakeFS: the bucket needs CORS rules first).
        disable_pre_signed_multipart: offer no pre-signed multipart uploads.
    """

    region: str = "us-east-1"
    endpoint: str | None = None
    force_path_style: bool = False
    discover_bucket_region: bool = True
    profile: str | None = None
    credentials: S3Credentials | None = None
    max_retries: int = Field(default=5, ge=0)
    max_pool_connections: int = Field(default=50, ge=1)
    multipart_part_size: int = Field(default=8 << 20, ge=5 << 20)
    list_page_size: int = Field(default=1000, ge=1, le=1000)
    lean_requests: bool = True
    pre_signed_expiry: timedelta = timedelta(minutes=15)
    pre_signed_endpoint: str | None = None
    disable_pre_signed: bool = False
    disable_pre_signed_ui: bool = True
    disable_pre_signed_multipart: bool = False

    @field_validator("pre_signed_expiry", mode="before")
    @classmethod
    def _parse_expiry(cls, value: object) -> timedelta:
        return _presigned_expiry(value)


def _presigned_expiry(value: object) -> timedelta:
    """A ``pre_signed_expiry`` value: a duration from 1 second to 7 days."""
    # imported here: the settings framework itself imports this module
    from lakefs_core.settings.durations import parse_duration

    expiry = parse_duration(value)
    if not timedelta(seconds=1) <= expiry <= MAX_PRESIGNED_EXPIRY:
        raise ValueError("pre_signed_expiry must be between 1s and 168h (7 days)")
    return expiry


#: the Azure public cloud's blob endpoint domain
AZURE_BLOB_DOMAIN = "blob.core.windows.net"


class AzureConfig(_Section):
    """``blockstore.azure``: Azure Blob Storage (or an emulator such as Azurite).

    Storage namespaces are ``https://<account>.<domain>/<container>[/<prefix>]``;
    with ``test_endpoint_url`` they are ``<test_endpoint_url>/<account>/<container>
    [/<prefix>]``, the path-style form an emulator serves.

    Attributes:
        storage_account: the storage account every namespace of this store is in.
        storage_access_key: the account's shared key; requests and pre-signed URLs
            (service SAS) are signed with it.
        auth_method: accepted as lakeFS names it (deprecated there); not used.
        china_cloud: accepted as lakeFS names it (deprecated there); set ``domain``.
        domain: the blob endpoint's domain (another Azure cloud's, for China or US
            Government clouds).
        test_endpoint_url: an emulator's endpoint (``http://127.0.0.1:10000``), used
            instead of ``https://<account>.<domain>``.
        try_timeout: how long one try of a request may take before it is retried.
        max_retries: retries of a failed request.
        upload_block_size: streaming writes are staged as blocks of this size and
            committed as one block list; a stream that fits in one block is written
            with a single request.
        pre_signed_expiry: how long a pre-signed (SAS) URL lives (``15m``; at most
            7 days).
        disable_pre_signed: offer no pre-signed URLs.
        disable_pre_signed_ui: tell the web UI not to use pre-signed URLs (the
            default, as lakeFS: the container needs CORS rules first).
    """

    storage_account: str | None = None
    storage_access_key: str | None = None
    auth_method: str | None = None
    china_cloud: bool = False
    domain: str = AZURE_BLOB_DOMAIN
    test_endpoint_url: str | None = None
    try_timeout: timedelta = timedelta(minutes=10)
    max_retries: int = Field(default=5, ge=0)
    upload_block_size: int = Field(default=8 << 20, ge=1 << 20, le=4000 << 20)
    pre_signed_expiry: timedelta = timedelta(minutes=15)
    disable_pre_signed: bool = False
    disable_pre_signed_ui: bool = True

    @field_validator("pre_signed_expiry", mode="before")
    @classmethod
    def _parse_expiry(cls, value: object) -> timedelta:
        return _presigned_expiry(value)

    @field_validator("try_timeout", mode="before")
    @classmethod
    def _parse_try_timeout(cls, value: object) -> timedelta:
        from lakefs_core.settings.durations import parse_duration

        timeout = parse_duration(value)
        if timeout <= timedelta(0):
            raise ValueError("try_timeout must be positive")
        return timeout

    @field_validator("test_endpoint_url")
    @classmethod
    def _check_endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ValueError("test_endpoint_url must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("storage_account")
    @classmethod
    def _check_account(cls, value: str | None) -> str | None:
        if value is not None and not _AZURE_ACCOUNT.match(value):
            raise ValueError("storage_account must be 3-24 lowercase letters and digits")
        return value


#: resumable uploads move data in multiples of this many bytes (GCS's rule)
GS_CHUNK_MULTIPLE = 256 << 10


class GSConfig(_Section):
    """``blockstore.gs``: Google Cloud Storage (or an emulator of its JSON API).

    Credentials come from ``credentials_file``, else ``credentials_json``, else
    Google's application default credentials. Pre-signed URLs (V4) are signed with
    a service-account key; other credentials offer none.

    Attributes:
        credentials_file: path of a service-account key (JSON) file.
        credentials_json: the service-account key itself, as JSON text (used when
            ``credentials_file`` is not set).
        endpoint: the JSON API endpoint; None means Google's own. Set it for a private
            endpoint or an emulator (pre-signed URLs name it too).
        anonymous: send requests without credentials (emulators); a configured key
            still signs pre-signed URLs.
        upload_chunk_size: streaming writes larger than this go as one resumable
            upload in chunks of this size (a multiple of 256 KiB).
        list_page_size: objects asked for per list request.
        pre_signed_expiry: how long a pre-signed URL lives (``15m``; at most 7 days).
        disable_pre_signed: offer no pre-signed URLs (clients move data through the
            server).
        disable_pre_signed_ui: tell the web UI not to use pre-signed URLs (the
            default, as lakeFS: the bucket needs CORS rules first).
        disable_pre_signed_multipart: offer no pre-signed multipart uploads (parts
            written as objects beside the target, composed when completed).
        server_side_encryption_customer_supplied: a customer-supplied AES-256 key, in
            hex, that encrypts every object written (exclusive with the KMS key).
        server_side_encryption_kms_key_id: a Cloud KMS key name that encrypts every
            object written.
    """

    credentials_file: str | None = None
    credentials_json: SecretStr | None = None
    endpoint: str | None = None
    anonymous: bool = False
    upload_chunk_size: int = Field(default=8 << 20, ge=GS_CHUNK_MULTIPLE)
    list_page_size: int = Field(default=1000, ge=1, le=1000)
    pre_signed_expiry: timedelta = timedelta(minutes=15)
    disable_pre_signed: bool = False
    disable_pre_signed_ui: bool = True
    disable_pre_signed_multipart: bool = False
    server_side_encryption_customer_supplied: SecretStr | None = None
    server_side_encryption_kms_key_id: str | None = None

    @field_validator("pre_signed_expiry", mode="before")
    @classmethod
    def _parse_expiry(cls, value: object) -> timedelta:
        return _presigned_expiry(value)

    @field_validator("upload_chunk_size")
    @classmethod
    def _check_chunk_size(cls, value: int) -> int:
        if value % GS_CHUNK_MULTIPLE:
            raise ValueError("upload_chunk_size must be a multiple of 256 KiB (262144)")
        return value

    @model_validator(mode="after")
    def _check_encryption(self) -> GSConfig:
        key = self.server_side_encryption_customer_supplied
        if key is not None and self.server_side_encryption_kms_key_id:
            raise ValueError("server_side_encryption_customer_supplied and "
                             "server_side_encryption_kms_key_id are exclusive")
        if key is not None:
            try:
                raw = bytes.fromhex(key.get_secret_value())
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise ValueError("server_side_encryption_customer_supplied must be a "
                                 "256-bit AES key in hex (64 hex digits)")
        return self


class SigningConfig(_Section):
    """``blockstore(s).signing``: the secret used to sign pre-signed links.

    Attributes:
        secret_key: accepted as lakeFS names it; links are signed by the store.
    """

    secret_key: str | None = None


class BlockstoreConfig(_Section):
    """The single-store ``blockstore`` section.

    Attributes:
        type: ``local``, ``s3``, ``azure`` or ``gs``; the section of that name
            configures it.
    """

    type: BlockstoreType = BlockstoreType.LOCAL
    local: LocalConfig | None = None
    s3: S3Config | None = None
    azure: AzureConfig | None = None
    gs: GSConfig | None = None
    signing: SigningConfig | None = None

    @model_validator(mode="after")
    def _fill_type_section(self) -> BlockstoreConfig:
        # the section named by ``type`` may be omitted: every field has a default
        if self.type is BlockstoreType.LOCAL and self.local is None:
            object.__setattr__(self, "local", LocalConfig())
        if self.type is BlockstoreType.S3 and self.s3 is None:
            object.__setattr__(self, "s3", S3Config())
        if self.type is BlockstoreType.AZURE and self.azure is None:
            object.__setattr__(self, "azure", AzureConfig())
        if self.type is BlockstoreType.GS and self.gs is None:
            object.__setattr__(self, "gs", GSConfig())
        return self


class StoreConfig(BlockstoreConfig):
    """One entry of ``blockstores.stores``: a blockstore plus its identity.

    Attributes:
        id: the storage id repositories name to be bound to this store.
        description: free text shown in the storage configuration.
        backward_compatible: repositories created without a storage id use this
            store (at most one store).
    """

    id: str
    description: str = ""
    backward_compatible: bool = False

    @model_validator(mode="after")
    def _check_id(self) -> StoreConfig:
        if not self.id.strip():
            raise ValueError("blockstores.stores: every store needs a non-empty id")
        return self


class BlockstoresConfig(_Section):
    """The multi-store ``blockstores`` section."""

    signing: SigningConfig | None = None
    stores: tuple[StoreConfig, ...]

    @model_validator(mode="after")
    def _check_stores(self) -> BlockstoresConfig:
        if not self.stores:
            raise ValueError("blockstores.stores: at least one store is required")
        seen: set[str] = set()
        for store in self.stores:
            if store.id in seen:
                raise ValueError(f"blockstores.stores: duplicate store id {store.id!r}")
            seen.add(store.id)
        compatible = [s.id for s in self.stores if s.backward_compatible]
        if len(compatible) > 1:
            raise ValueError(
                "blockstores.stores: at most one store may be backward_compatible, "
                f"found {compatible}"
            )
        return self


def type_section(config: BlockstoreConfig) -> Any:
    """The type-specific section of ``config`` (its ``local``, ``s3``, ``azure`` or ``gs``
    value)."""
    return getattr(config, config.type.value)
