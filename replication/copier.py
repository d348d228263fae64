"""The builtin object copier (``object_replication.mode: builtin``).

Where the store has no replication of its own (local disks, MinIO, cross-cloud
pairs), the destination sidecar copies what a commit misses: directly store to store
when a source blockstore is configured for the source region, otherwise through the
source server's API, which works across any pair. Copies run with bounded
concurrency and bounded retries; a copy is only ever a hint: the validator proves
presence independently before anything is promoted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tenacity import (
    Retrying,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.graveler.model import AddressType
from lakefs_core.graveler.presence import MissingItem, MissingKind
from replication.source import SourceClient, SourceForbiddenError

log = logging.getLogger("replication.copier")


@dataclass(frozen=True, slots=True)
class CopySource:
    """Where a mirror's missing pieces come from."""

    repository: str
    commit_id: str
    client: SourceClient
    #: the source store and namespace, when this sidecar can reach them directly
    store: BlockStore | None = None
    namespace: str = ""


@dataclass
class CopyReport:
    copied: int = 0
    failed: int = 0
    #: the first read the replication user was refused (401/403): no retry helps, the
    #: mirror cannot advance until its policy changes, so the caller reports it
    denied: SourceForbiddenError | None = None


class BuiltinCopier:
    """Copies what mirrors miss, each into the store of its own mirror repository."""

    def __init__(self, *, concurrency: int = 8, retries: int = 5) -> None:
        self.concurrency = concurrency
        self.retries = retries
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix="builtin-copier")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def copy(self, source: CopySource, dest: BlockStore, items: Sequence[MissingItem]
             ) -> CopyReport:
        """Copy every item into ``dest`` (the mirror repository's store, at each item's
        address); failures are counted, never raised (validation decides).

        A refused read (401/403) is not retried: it is counted as failed and the first
        one is in :attr:`CopyReport.denied`.
        """
        report = CopyReport()
        for outcome in self._pool.map(lambda item: self._copy_one(source, dest, item), items):
            if outcome is None:
                report.copied += 1
                continue
            report.failed += 1
            if isinstance(outcome, SourceForbiddenError) and report.denied is None:
                report.denied = outcome
        return report

    def _copy_one(self, source: CopySource, dest: BlockStore, item: MissingItem
                  ) -> Exception | None:
        """None once copied, else the last error."""
        try:
            for attempt in Retrying(stop=stop_after_attempt(self.retries + 1),
                                    wait=wait_random_exponential(multiplier=0.05, max=2),
                                    retry=retry_if_not_exception_type(SourceForbiddenError),
                                    reraise=True):
                with attempt:
                    self._transfer(source, dest, item)
        except Exception as e:  # noqa: BLE001 - reported, validation retries later
            log.warning("copy of %s %s failed: %s", item.kind.value, item.key, e)
            return e
        return None

    @staticmethod
    def _transfer(source: CopySource, dest: BlockStore, item: MissingItem) -> None:
        if item.kind is MissingKind.OBJECT:
            entry = item.entry
            assert entry is not None
            if source.store is not None:
                src = (entry.address if entry.address_type is AddressType.FULL
                       else join_address(source.namespace, entry.address))
                dest.put(item.address, source.store.get_stream(src))
            else:  # streamed: a large object is never held whole in memory
                with source.client.open_object(source.repository, source.commit_id,
                                               item.key) as chunks:
                    dest.put(item.address, chunks)
            return
        if source.store is not None:
            src = join_address(source.namespace, f"_lakefs/{item.key}")
            dest.put(item.address, source.store.get_stream(src))
        else:
            dest.put(item.address, source.client.read_metadata_file(source.repository, item.key))
