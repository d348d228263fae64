"""Typed options of the Spark data source and jobs: where the server is, where the data is.

Everything here is a small frozen value object built from Spark's string options
(or keyword arguments), so it pickles to executors unchanged.

Server (:class:`ServerOptions`):

============================  ==============================================================
``endpoint``                  the server's URL (``http://host:8000``; a trailing ``/api/v1``
                              is accepted); else ``LAKECTL_SERVER_ENDPOINT_URL``
``access_key_id``             else ``LAKECTL_CREDENTIALS_ACCESS_KEY_ID``
``secret_access_key``         else ``LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY``
============================  ==============================================================

Storage (:class:`StorageOptions`), read directly by the executors; the store type
follows the repository's storage namespace (``local://``, ``s3://``, Azure's
``https://<account>.blob.core.windows.net/<container>/...`` or an emulator's
``http://<host>:<port>/<account>/<container>/...``, or ``gs://``):

============================  ==============================================================
``blockstore_root``           local stores: the directory holding every ``local://`` name
                              (the server's ``blockstore.local.path``, by default
                              ``<data_dir>/blockstore``)
``s3_endpoint``               S3 stores: an endpoint URL (MinIO, moto); default AWS
``s3_region``                 default ``AWS_DEFAULT_REGION`` or ``us-east-1``
``s3_access_key_id``          with ``s3_secret_access_key`` (and ``s3_session_token``);
                              default: the AWS credential chain
``s3_force_path_style``       ``true``/``false``; default true when ``s3_endpoint`` is set
``azure_storage_access_key``  Azure stores: the storage account's shared key (required)
``azure_storage_account``     default: the account the namespace names
``azure_test_endpoint_url``   an emulator's endpoint (Azurite); default: taken from a
                              namespace that is not on ``<account>.blob.<azure_domain>``
``azure_domain``              default ``blob.core.windows.net`` (another Azure cloud's)
``gs_endpoint``               Cloud Storage: the JSON API endpoint (an emulator); default
                              Google's
``gs_credentials_file``       a service-account key file (or ``gs_credentials_json``, the
                              key itself); default: Google's application credentials
``gs_anonymous``              ``true``: send no credentials (emulators)
============================  ==============================================================
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import SecretStr

from lakefs_core.block.base import BlockStore
from lakefs_core.block.config import (
    AZURE_BLOB_DOMAIN,
    AzureConfig,
    BlockstoreConfig,
    BlockstoreType,
    GSConfig,
    LocalConfig,
    S3Config,
    S3Credentials,
)
from lakefs_core.block.registry import open_blockstore
from lakefs_core.errors import ValidationError

#: environment variables the lakeFS tools (lakectl) read, used when options are absent
ENV_ENDPOINT = "LAKECTL_SERVER_ENDPOINT_URL"
ENV_ACCESS_KEY_ID = "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"
ENV_SECRET_ACCESS_KEY = "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _get(options: Mapping[str, str], name: str) -> str | None:
    """An option by case-insensitive name (Spark lower-cases option keys)."""
    value = options.get(name)
    if value is None:
        lowered = name.lower()
        for key, v in options.items():
            if key.lower() == lowered:
                value = v
                break
    return None if value is None or value == "" else str(value)


def option_str(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """A string option, or ``default`` when absent or empty."""
    value = _get(options, name)
    return default if value is None else value


def option_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean option (``true/false``, ``1/0``, ``yes/no``, ``on/off``).

    Raises:
        ValidationError: any other value.
    """
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ValidationError(f"option {name!r} must be true or false, not {value!r}")


def option_int(options: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    """An integer option of at least ``minimum``.

    Raises:
        ValidationError: not an integer, or below ``minimum``.
    """
    value = _get(options, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValidationError(f"option {name!r} must be an integer, not {value!r}") from None
    if number < minimum:
        raise ValidationError(f"option {name!r} must be at least {minimum}, not {number}")
    return number


def require(options: Mapping[str, str], name: str) -> str:
    """A required string option.

    Raises:
        ValidationError: the option is missing or empty.
    """
    value = _get(options, name)
    if value is None:
        raise ValidationError(f"option {name!r} is required")
    return value


@dataclass(frozen=True)
class ServerOptions:
    """How to reach a server's REST API.

    Attributes:
        endpoint: the base URL, without ``/api/v1``.
        access_key_id: the caller's access key id.
        secret_access_key: its secret.
    """

    endpoint: str
    access_key_id: str
    secret_access_key: str

    def __post_init__(self) -> None:
        endpoint = self.endpoint.rstrip("/")
        endpoint = endpoint.removesuffix("/api/v1")
        object.__setattr__(self, "endpoint", endpoint)

    def __repr__(self) -> str:  # never print the secret
        return f"ServerOptions(endpoint={self.endpoint!r}, access_key_id={self.access_key_id!r})"

    @classmethod
    def from_options(cls, options: Mapping[str, str],
                     environ: Mapping[str, str] | None = None) -> ServerOptions:
        """From Spark options, falling back to the ``LAKECTL_*`` environment variables.

        Raises:
            ValidationError: no endpoint or no credentials anywhere.
        """
        env = os.environ if environ is None else environ
        endpoint = option_str(options, "endpoint") or env.get(ENV_ENDPOINT)
        key = option_str(options, "access_key_id") or env.get(ENV_ACCESS_KEY_ID)
        secret = option_str(options, "secret_access_key") or env.get(ENV_SECRET_ACCESS_KEY)
        if not endpoint:
            raise ValidationError(f"option 'endpoint' is required (or set {ENV_ENDPOINT})")
        if not key or not secret:
            raise ValidationError(
                "options 'access_key_id' and 'secret_access_key' are required "
                f"(or set {ENV_ACCESS_KEY_ID} and {ENV_SECRET_ACCESS_KEY})")
        return cls(endpoint, key, secret)


@dataclass(frozen=True)
class StorageOptions:
    """How executors reach the object store directly (never through the server).

    Attributes:
        blockstore_root: root directory of a local blockstore.
        s3_endpoint: S3 endpoint URL (None: AWS).
        s3_region: S3 signing region.
        s3_access_key_id: static S3 key (None: the AWS credential chain).
        s3_secret_access_key: its secret.
        s3_session_token: optional session token.
        s3_force_path_style: path-style bucket addressing (None: when an endpoint is set).
        azure_storage_account: Azure storage account (None: the namespace's).
        azure_storage_access_key: its shared key.
        azure_test_endpoint_url: an emulator's endpoint (None: the namespace's, when
            it is not on ``<account>.<azure_domain>``).
        azure_domain: the blob endpoint's domain.
        gs_endpoint: Cloud Storage JSON API endpoint (None: Google's).
        gs_credentials_file: a service-account key file.
        gs_credentials_json: the key itself.
        gs_anonymous: send no credentials.
    """

    blockstore_root: str | None = None
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    s3_session_token: str | None = None
    s3_force_path_style: bool | None = None
    azure_storage_account: str | None = None
    azure_storage_access_key: str | None = None
    azure_test_endpoint_url: str | None = None
    azure_domain: str = AZURE_BLOB_DOMAIN
    gs_endpoint: str | None = None
    gs_credentials_file: str | None = None
    gs_credentials_json: str | None = None
    gs_anonymous: bool = False

    def __repr__(self) -> str:  # never print the secrets
        return (f"StorageOptions(blockstore_root={self.blockstore_root!r}, "
                f"s3_endpoint={self.s3_endpoint!r}, s3_region={self.s3_region!r}, "
                f"azure_storage_account={self.azure_storage_account!r}, "
                f"azure_test_endpoint_url={self.azure_test_endpoint_url!r}, "
                f"gs_endpoint={self.gs_endpoint!r})")

    @classmethod
    def from_options(cls, options: Mapping[str, str], prefix: str = "") -> StorageOptions:
        """From Spark options, each name optionally preceded by ``prefix``."""
        force = _get(options, prefix + "s3_force_path_style")
        return cls(
            blockstore_root=option_str(options, prefix + "blockstore_root"),
            s3_endpoint=option_str(options, prefix + "s3_endpoint"),
            s3_region=option_str(options, prefix + "s3_region"),
            s3_access_key_id=option_str(options, prefix + "s3_access_key_id"),
            s3_secret_access_key=option_str(options, prefix + "s3_secret_access_key"),
            s3_session_token=option_str(options, prefix + "s3_session_token"),
            s3_force_path_style=(None if force is None else
                                 option_bool(options, prefix + "s3_force_path_style", True)),
            azure_storage_account=option_str(options, prefix + "azure_storage_account"),
            azure_storage_access_key=option_str(options, prefix + "azure_storage_access_key"),
            azure_test_endpoint_url=option_str(options, prefix + "azure_test_endpoint_url"),
            azure_domain=option_str(options, prefix + "azure_domain") or AZURE_BLOB_DOMAIN,
            gs_endpoint=option_str(options, prefix + "gs_endpoint"),
            gs_credentials_file=option_str(options, prefix + "gs_credentials_file"),
            gs_credentials_json=option_str(options, prefix + "gs_credentials_json"),
            gs_anonymous=option_bool(options, prefix + "gs_anonymous", False),
        )

    def _azure_location(self, namespace: str) -> tuple[str, str | None]:
        """The storage account and emulator endpoint (None: Azure's own) of an Azure
        namespace, options first.

        Raises:
            ValidationError: a namespace naming no account.
        """
        url = urlsplit(namespace)
        host = url.hostname or ""
        suffix = "." + self.azure_domain
        endpoint = self.azure_test_endpoint_url
        if endpoint is None and not host.endswith(suffix):
            endpoint = f"{url.scheme}://{url.netloc}"  # path-style: an emulator
        if endpoint is not None:
            account = self.azure_storage_account or next(
                (p for p in url.path.split("/") if p), "")
        else:
            account = self.azure_storage_account or host.removesuffix(suffix)
        if not account:
            raise ValidationError(f"storage namespace {namespace!r} names no Azure storage "
                                  "account: set option 'azure_storage_account'")
        return account, endpoint.rstrip("/") if endpoint else None

    def store_key(self, namespace: str) -> str:
        """What tells the stores of two namespaces apart under these options."""
        scheme = namespace.partition("://")[0]
        if scheme in ("http", "https"):
            account, endpoint = self._azure_location(namespace)
            return f"azure|{account}|{endpoint or ''}"
        return scheme

    def blockstore_config(self, namespace: str) -> BlockstoreConfig:
        """The blockstore section that serves ``namespace`` (by its URI scheme).

        Raises:
            ValidationError: an unsupported scheme, or a local namespace without
                ``blockstore_root``.
        """
        scheme = namespace.partition("://")[0]
        if scheme == "local":
            if not self.blockstore_root:
                raise ValidationError(
                    f"storage namespace {namespace!r} is on a local blockstore: "
                    "set option 'blockstore_root' to its root directory")
            return BlockstoreConfig(type=BlockstoreType.LOCAL,
                                    local=LocalConfig(path=self.blockstore_root))
        if scheme == "s3":
            creds = None
            if self.s3_access_key_id and self.s3_secret_access_key:
                creds = S3Credentials(access_key_id=self.s3_access_key_id,
                                      secret_access_key=self.s3_secret_access_key,
                                      session_token=self.s3_session_token)
            force = self.s3_force_path_style
            return BlockstoreConfig(type=BlockstoreType.S3, s3=S3Config(
                region=self.s3_region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
                endpoint=self.s3_endpoint,
                force_path_style=bool(self.s3_endpoint) if force is None else force,
                credentials=creds,
            ))
        if scheme in ("http", "https"):
            if not self.azure_storage_access_key:
                raise ValidationError(
                    f"storage namespace {namespace!r} is on Azure Blob Storage: set option "
                    "'azure_storage_access_key' to its storage account's key")
            account, endpoint = self._azure_location(namespace)
            return BlockstoreConfig(type=BlockstoreType.AZURE, azure=AzureConfig(
                storage_account=account, storage_access_key=self.azure_storage_access_key,
                test_endpoint_url=endpoint, domain=self.azure_domain))
        if scheme == "gs":
            return BlockstoreConfig(type=BlockstoreType.GS, gs=GSConfig(
                endpoint=self.gs_endpoint, credentials_file=self.gs_credentials_file,
                credentials_json=(SecretStr(self.gs_credentials_json)
                                  if self.gs_credentials_json else None),
                anonymous=self.gs_anonymous))
        raise ValidationError(f"storage namespace {namespace!r}: unsupported scheme {scheme!r}")

    def open(self, namespace: str) -> BlockStore:
        """The blockstore serving ``namespace``; one per process and configuration.

        Raises:
            ValidationError: see :meth:`blockstore_config`.
            StorageError: the store's driver cannot start.
        """
        self.blockstore_config(namespace)  # fail early, and uncached
        key = (self, self.store_key(namespace))
        with _STORES_LOCK:
            store = _STORES.get(key)
            if store is None:
                # executors run many tasks per Python worker: build each store (a boto3
                # client for S3) once rather than once per partition
                store = open_blockstore(self.blockstore_config(namespace))
                if len(_STORES) >= _MAX_STORES:
                    _STORES.pop(next(iter(_STORES)))  # the oldest; its users keep it
                _STORES[key] = store
            return store


#: the stores opened in this process, by options and store (see ``StorageOptions.open``)
_STORES: dict[tuple[StorageOptions, str], BlockStore] = {}
_STORES_LOCK = threading.Lock()
_MAX_STORES = 16
