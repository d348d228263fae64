"""The configured blockstores, by storage id, and the lazy driver registry.

A server runs either one store (the ``blockstore`` section; its storage id is
``""``) or several (the ``blockstores`` section, each store with an
``id``). A repository records the storage id it was created on; ``""`` means the
single store, or in multi-store mode the store marked ``backward_compatible``.

Drivers are imported only when a configured store needs them, so a local-only
server never imports boto3.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from lakefs_core.block.base import BlockStore
from lakefs_core.block.config import (
    BlockstoreConfig,
    BlockstoresConfig,
    BlockstoreType,
    StoreConfig,
)
from lakefs_core.errors import StorageError, StorageNotFoundError, ValidationError


# --- drivers ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BlockstoreDriver:
    """How to build one type of blockstore, importing its module only on demand.

    Attributes:
        module: the adapter module.
        factory: a callable in ``module`` taking the whole store config section.
        requirement: what to install when the module's imports fail.
    """

    module: str
    factory: str
    requirement: str

    def load(self) -> Callable[[BlockstoreConfig], BlockStore]:
        """Import the adapter.

        Raises:
            StorageError: a package the adapter needs is not installed.
        """
        try:
            mod = importlib.import_module(self.module)
        except ImportError as e:
            raise StorageError(
                f"blockstore driver {self.module} cannot be imported ({e}); "
                f"install {self.requirement}"
            ) from e
        factory: Callable[[BlockstoreConfig], BlockStore] = getattr(mod, self.factory)
        return factory


#: every blockstore type this server can drive, keyed by ``blockstore.type``
BLOCKSTORE_DRIVERS: Mapping[BlockstoreType, BlockstoreDriver] = {
    BlockstoreType.LOCAL: BlockstoreDriver(
        "lakefs_core.block.local", "from_config", "lakefs-mirror (the local driver is built in)"
    ),
    BlockstoreType.S3: BlockstoreDriver(
        "lakefs_core.block.s3", "from_config", "boto3: pip install boto3"
    ),
    BlockstoreType.AZURE: BlockstoreDriver(
        "lakefs_core.block.azure", "from_config",
        "azure-storage-blob: pip install azure-storage-blob"
    ),
    BlockstoreType.GS: BlockstoreDriver(
        "lakefs_core.block.gs", "from_config",
        "google-cloud-storage: pip install google-cloud-storage",
    ),
}


def open_blockstore(config: BlockstoreConfig) -> BlockStore:
    """Build the blockstore a config section describes, importing only its driver.

    Raises:
        StorageError: the driver's packages are missing or the store cannot start.
    """
    return BLOCKSTORE_DRIVERS[config.type].load()(config)


# --- the stores of one server --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What the server tells clients about one configured store (the config API)."""

    id: str
    type: str
    description: str = ""
    backward_compatible: bool = False


def _parse(model: type[pydantic.BaseModel], value: Any, section: str) -> Any:
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or section}: {err['msg']}"
            for err in e.errors()
        )
        raise ValidationError(f"invalid {section} configuration: {problems}") from e


class BlockStores:
    """The blockstores of one server, by storage id.

    Build it with :meth:`from_config` (or :meth:`single` around one store). Pass
    :meth:`for_storage_id` wherever a ``storage id -> BlockStore`` lookup is needed.

    Args:
        stores: ``(info, store)`` pairs in configuration order; ids unique.
        multi: whether the stores came from a ``blockstores`` section.

    Raises:
        ValidationError: duplicate ids, or more than one backward-compatible store.
    """

    def __init__(self, stores: Sequence[tuple[StoreInfo, BlockStore]], *, multi: bool) -> None:
        if not stores:
            raise ValidationError("no blockstore configured")
        if not multi and len(stores) != 1:
            raise ValidationError("single-store mode holds exactly one blockstore")
        self._stores: dict[str, tuple[StoreInfo, BlockStore]] = {}
        for info, store in stores:
            if info.id in self._stores:
                raise ValidationError(f"duplicate blockstore id {info.id!r}")
            self._stores[info.id] = (info, store)
        self.multi = multi
        compatible = [info.id for info, _ in stores if info.backward_compatible]
        if len(compatible) > 1:
            raise ValidationError(
                f"at most one blockstore may be backward_compatible, found {compatible}"
            )
        self._default_id: str | None = stores[0][0].id if not multi else (
            compatible[0] if compatible else None
        )

    @classmethod
    def single(cls, store: BlockStore) -> BlockStores:
        """Single-store mode around an existing store (its storage id is ``""``)."""
        return cls([(StoreInfo(id="", type=store.type), store)], multi=False)

    @classmethod
    def from_config(
        cls,
        blockstore: BlockstoreConfig | Mapping[str, Any] | None = None,
        blockstores: BlockstoresConfig | Mapping[str, Any] | None = None,
    ) -> BlockStores:
        """Open the stores of a ``blockstore`` or a ``blockstores`` section.

        Raises:
            ValidationError: both sections or neither given, or a section is invalid
                (empty or duplicate ids, more than one backward-compatible store, an
                unknown type).
            StorageError: a store's driver is missing or the store cannot start.
        """
        if blockstore is not None and blockstores is not None:
            raise ValidationError(
                "blockstore and blockstores are mutually exclusive: configure a single "
                "store under blockstore, or several under blockstores.stores"
            )
        if blockstores is not None:
            multi: BlockstoresConfig = _parse(BlockstoresConfig, blockstores, "blockstores")
            return cls(
                [(_info(store), open_blockstore(store)) for store in multi.stores], multi=True
            )
        if blockstore is None:
            raise ValidationError("no blockstore configured: set blockstore or blockstores")
        config: BlockstoreConfig = _parse(BlockstoreConfig, blockstore, "blockstore")
        return cls([(StoreInfo(id="", type=config.type.value), open_blockstore(config))],
                   multi=False)

    @classmethod
    def from_server_config(cls, config: Mapping[str, Any]) -> BlockStores:
        """Open the stores named by a whole server configuration mapping (as read from YAML).

        Raises:
            ValidationError: see :meth:`from_config`.
        """
        return cls.from_config(config.get("blockstore"), config.get("blockstores"))

    # --- lookups ------------------------------------------------------------------
    def ids(self) -> list[str]:
        """The storage ids, in configuration order (``[""]`` in single-store mode)."""
        return list(self._stores)

    def describe(self) -> list[StoreInfo]:
        """Every store's id, type, description and backward-compatibility flag."""
        return [info for info, _ in self._stores.values()]

    def __iter__(self) -> Iterator[BlockStore]:
        return (store for _, store in self._stores.values())

    def __len__(self) -> int:
        return len(self._stores)

    def default(self) -> BlockStore:
        """The store of repositories created without a storage id.

        Raises:
            StorageNotFoundError: multi-store mode with no backward-compatible store,
                where every repository must name its storage id.
        """
        if self._default_id is None:
            raise StorageNotFoundError(
                "no blockstore is backward_compatible: a storage id is required"
            )
        return self._stores[self._default_id][1]

    def store(self, store_id: str) -> BlockStore:
        """The store configured with ``store_id`` (``""`` in single-store mode).

        Raises:
            StorageNotFoundError: no store has that id.
        """
        found = self._stores.get(store_id)
        if found is None:
            raise StorageNotFoundError(f"blockstore {store_id!r} is not configured")
        return found[1]

    def for_storage_id(self, storage_id: str) -> BlockStore:
        """The store a repository's ``storage_id`` names (``""``: the default store).

        Raises:
            StorageNotFoundError: no store has that id (or ``""`` has no default).
        """
        if not storage_id:
            return self.default()
        found = self._stores.get(storage_id) if self.multi else None
        if found is None:
            known = ", ".join(repr(i) for i in self._stores) if self.multi else "none"
            raise StorageNotFoundError(
                f"blockstore {storage_id!r} is not configured (configured ids: {known})"
            )
        return found[1]

    def for_address(self, address: str, storage_id: str | None = None) -> BlockStore:
        """A store that can read an absolute address such as ``s3://bucket/key``.

        Preference: the store named by ``storage_id`` (if it serves the scheme),
        then the default store, then the first configured store of that scheme.

        Raises:
            ValidationError: ``address`` has no ``scheme://``.
            StorageNotFoundError: no configured store serves that scheme.
        """
        scheme, sep, _ = address.partition("://")
        if not sep or not scheme:
            raise ValidationError(f"not an absolute storage address: {address!r}")
        candidates: list[BlockStore] = []
        if storage_id is not None:
            candidates.append(self.for_storage_id(storage_id))
        if self._default_id is not None:
            candidates.append(self._stores[self._default_id][1])
        candidates.extend(self)
        for store in candidates:
            if store.scheme == scheme:
                return store
        raise StorageNotFoundError(f"no configured blockstore serves {scheme}:// addresses")

    def close(self) -> None:
        """Close every store."""
        for store in self:
            store.close()


def _info(store: StoreConfig) -> StoreInfo:
    return StoreInfo(id=store.id, type=store.type.value, description=store.description,
                     backward_compatible=store.backward_compatible)


# --- storage namespaces ------------------------------------------------------------
_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+\Z")
#: Cloud Storage bucket names: 3-63 characters, or up to 222 in dot-separated parts
_GS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]\Z")
#: control characters, backslashes, and lone surrogates (JSON can escape one; no text)
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\\ud800-\udfff]")


#: the longest storage namespace, and the longest segment of one
MAX_NAMESPACE_LENGTH = 1024
MAX_NAMESPACE_SEGMENT = 255


def namespace_parts(namespace: str) -> tuple[str, list[str]]:
    """The scheme and path segments of a well-formed storage namespace URI.

    ``<scheme>://<name>[/<segment>...]``, one trailing slash allowed; no empty, ``.``
    or ``..`` segments, no control characters, backslashes or lone surrogates, at most
    :data:`MAX_NAMESPACE_LENGTH` characters.

    Raises:
        ValidationError: the namespace is not well-formed.
    """
    if not isinstance(namespace, str) or "://" not in namespace:
        raise ValidationError(f"invalid storage namespace {namespace!r}: expected scheme://...")
    if len(namespace) > MAX_NAMESPACE_LENGTH:
        raise ValidationError(
            f"storage namespace longer than {MAX_NAMESPACE_LENGTH} characters")
    if _BAD_CHARS.search(namespace) or namespace != namespace.strip():
        raise ValidationError(f"storage namespace {namespace!r} has forbidden characters")
    scheme, _, rest = namespace.partition("://")
    parts = rest.split("/")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()  # one trailing slash
    if not parts[0]:
        raise ValidationError(f"storage namespace {namespace!r} names no bucket or directory")
    if any(p in ("", ".", "..") for p in parts):
        raise ValidationError(
            f"storage namespace {namespace!r} has an empty, '.' or '..' path segment")
    if any(len(p) > MAX_NAMESPACE_SEGMENT for p in parts):
        raise ValidationError(f"storage namespace {namespace!r} has a segment longer than "
                              f"{MAX_NAMESPACE_SEGMENT} characters")
    return scheme, parts


def repository_namespace(namespace: str) -> str:
    """The namespace a repository keeps for ``namespace``: ``local:///name`` (what a
    client builds from the advertised ``local://`` prefix as ``f"{prefix}/{name}"``,
    and which lakeFS's local adapter also reads below its root) becomes
    ``local://name``, so that one place has one spelling; any other is unchanged.

    Outside a namespace, ``local:///<absolute path>`` names a file anywhere (imports):
    that meaning is for addresses, never for a repository's namespace.
    """
    local = "local://"
    if namespace.startswith(local + "/"):
        return local + namespace[len(local):].lstrip("/")
    return namespace


def canonical_namespace(namespace: str) -> str:
    """A well-formed namespace without its trailing slash (what repositories compare)."""
    scheme, parts = namespace_parts(namespace)
    return f"{scheme}://" + "/".join(parts)


def namespaces_overlap(a: str, b: str, *, nested: bool = True) -> bool:
    """Whether two namespaces are the same, or (``nested``) one lies inside the other.

    A namespace stored by an earlier version that is not well-formed compares as
    written (less its trailing slashes).
    """
    a, b = _comparable(a) + "/", _comparable(b) + "/"
    if not nested:
        return a == b
    return a.startswith(b) or b.startswith(a)


def _comparable(namespace: str) -> str:
    try:
        return canonical_namespace(namespace)
    except ValidationError:
        return namespace.rstrip("/")


def validate_namespace(store: BlockStore, namespace: str) -> str:
    """Check that a storage namespace URI is well-formed for ``store``.

    ``local://name[/prefix]`` for a local store, ``s3://bucket[/prefix]`` (a valid
    bucket name) for S3, ``https://<account>.blob.core.windows.net/<container>[/prefix]``
    (the store's account, a valid container name) for Azure, ``gs://bucket[/prefix]``
    for Cloud Storage. A trailing slash is allowed; empty, ``.`` and ``..`` segments,
    control characters and backslashes are not.

    Returns:
        ``namespace``, unchanged.

    Raises:
        ValidationError: the namespace does not fit the store.
    """
    prefix = f"{store.scheme}://"
    if not namespace.startswith(prefix):
        raise ValidationError(
            f"storage namespace {namespace!r} does not fit the {store.type} blockstore: "
            f"expected {prefix}..."
        )
    _, parts = namespace_parts(namespace)
    store.check_namespace(namespace)
    if store.scheme == "s3":
        bucket = parts[0]
        if not _S3_BUCKET.match(bucket) or ".." in bucket or _IPV4.match(bucket):
            raise ValidationError(
                f"storage namespace {namespace!r}: {bucket!r} is not a valid S3 bucket name"
            )
    if store.scheme == "gs" and not _valid_gs_bucket(parts[0]):
        raise ValidationError(
            f"storage namespace {namespace!r}: {parts[0]!r} is not a valid Cloud Storage "
            "bucket name")
    return namespace


def _valid_gs_bucket(bucket: str) -> bool:
    return (bool(_GS_BUCKET.match(bucket)) and not _IPV4.match(bucket)
            and not bucket.startswith("goog") and ".." not in bucket
            and all(0 < len(part) <= 63 for part in bucket.split(".")))
