"""Blockstores: where object data and range files live.

``BlockStore`` is the interface; ``LocalBlockStore``, ``S3BlockStore`` and
``AzureBlobStore`` implement it; ``BlockStores`` holds a server's stores by storage
id. ``S3BlockStore`` and ``AzureBlobStore`` are imported on first use, so importing
this package imports neither boto3 nor the Azure SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakefs_core.block.base import BlockStore, ObjectStat, join_address
from lakefs_core.block.config import (
    AzureConfig,
    BlockstoreConfig,
    BlockstoresConfig,
    BlockstoreType,
    GSConfig,
    LocalConfig,
    S3Config,
    S3Credentials,
    SigningConfig,
    StoreConfig,
)
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.block.registry import (
    BLOCKSTORE_DRIVERS,
    BlockstoreDriver,
    BlockStores,
    StoreInfo,
    open_blockstore,
    validate_namespace,
)

if TYPE_CHECKING:
    from lakefs_core.block.azure import AzureBlobStore
    from lakefs_core.block.s3 import S3BlockStore

__all__ = [
    "BLOCKSTORE_DRIVERS",
    "AzureBlobStore",
    "AzureConfig",
    "BlockStore",
    "BlockStores",
    "BlockstoreConfig",
    "BlockstoreDriver",
    "BlockstoreType",
    "BlockstoresConfig",
    "GSConfig",
    "LocalBlockStore",
    "LocalConfig",
    "ObjectStat",
    "S3BlockStore",
    "S3Config",
    "S3Credentials",
    "SigningConfig",
    "StoreConfig",
    "StoreInfo",
    "join_address",
    "open_blockstore",
    "validate_namespace",
]


def __getattr__(name: str) -> Any:
    if name == "S3BlockStore":
        from lakefs_core.block.s3 import S3BlockStore

        return S3BlockStore
    if name == "AzureBlobStore":
        from lakefs_core.block.azure import AzureBlobStore

        return AzureBlobStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
