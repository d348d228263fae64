"""Mirror backfill and validation as a Spark job: every object of a commit, across executors.

A new mirror of a large repository must prove (and with ``builtin`` replication,
first copy) every range and every object of the commit it starts from. The
sidecar's validator does that incrementally from a proven base; for the first,
full pass this job spreads the work over Spark tasks, one group of ranges each:

- each task checks its ranges in the destination namespace (present, and hashing
  to their id), then proves every object its ranges reference there, with the size
  and etag the entry records, choosing as the validator does
  (:meth:`~lakefs_core.graveler.presence.CommitValidator.check_objects`): when the
  task's objects under the namespace outnumber what listing the namespace costs
  (about one request per 1,000 objects of the commit), by listing it, else (and for
  imported objects elsewhere, and on the local store, whose listing stats each file)
  by one stat each;
- with ``copy=True`` it copies whatever is missing or different from the source
  store (store to store, streamed) and checks it again;
- the driver then checks (and copies) the metarange last, so a metarange never
  lands before the ranges it lists.

The report counts what was checked, present and copied, and lists what is still
missing; ``complete`` means the mirror's validator will find nothing missing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.errors import NotFoundError, StorageError
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID, metarange_id, range_id
from lakefs_core.graveler.model import AddressType, Entry
from lakefs_core.graveler.presence import CommitValidator, MissingItem, MissingKind
from lakefs_core.graveler.rangefile import decode_metarange, decode_range
from lakefs_core.graveler.ranges import RangeManager
from lakefs_core.spark.cli import job_parser, job_session, option_pairs, print_report
from lakefs_core.spark.client import LakeFSClient
from lakefs_core.spark.options import ServerOptions, StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("lakefs_core.spark.backfill")

#: concurrent object checks/copies inside one task (object stores are latency-bound)
TASK_THREADS = 16
#: missing items a report lists in full (the counts are always exact)
MAX_LISTED_MISSING = 1000

#: what one task reports: counts, and the missing items it lists
_Counts = dict[str, Any]


@dataclass(frozen=True)
class StoreLocation:
    """A storage namespace and how to reach its store (picklable)."""

    storage: StorageOptions
    namespace: str

    def open(self) -> BlockStore:
        return self.storage.open(self.namespace)

    def file_address(self, file_id: str) -> str:
        return join_address(self.namespace, f"_lakefs/{file_id}")


@dataclass
class BackfillReport:
    """What a backfill/validation run found and did.

    Attributes:
        metarange_id: the metarange validated.
        copy: whether missing pieces were copied.
        ranges: ranges the metarange lists.
        ranges_copied: ranges copied to the destination.
        objects_checked: objects stat'ed in the destination.
        objects_present: objects found with the right size and etag at first look.
        objects_copied: objects copied (then found right).
        missing_count: pieces still missing or different at the end.
        missing: up to :data:`MAX_LISTED_MISSING` of them: ``{kind, key, address, reason}``.
    """

    metarange_id: str
    copy: bool
    ranges: int = 0
    ranges_copied: int = 0
    objects_checked: int = 0
    objects_present: int = 0
    objects_copied: int = 0
    missing_count: int = 0
    missing: list[dict[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Everything the commit needs is in the destination."""
        return self.missing_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}

    def add(self, part: _Counts) -> None:
        """Add one task's counts."""
        self.ranges_copied += part["ranges_copied"]
        self.objects_checked += part["objects_checked"]
        self.objects_present += part["objects_present"]
        self.objects_copied += part["objects_copied"]
        self.missing_count += part["missing_count"]
        room = MAX_LISTED_MISSING - len(self.missing)
        self.missing.extend(part["missing"][:max(room, 0)])


def _missing_dict(item: MissingItem) -> dict[str, str]:
    return {"kind": item.kind.value, "key": item.key, "address": item.address,
            "reason": item.reason}


def _file_ok(location: StoreLocation, file_id: str, *, is_range: bool) -> bool:
    """Whether a range (or metarange) file is in the store and hashes to its id."""
    try:
        data = location.open().get(location.file_address(file_id))
        if is_range:
            return range_id(decode_range(data)) == file_id
        return metarange_id(decode_metarange(data)) == file_id
    except (NotFoundError, StorageError):
        return False


def _copy_file(source: StoreLocation, dest: StoreLocation, file_id: str) -> None:
    dest.open().put(dest.file_address(file_id),
                    source.open().get_stream(source.file_address(file_id)))


def _check_ranges(source: StoreLocation, dest: StoreLocation, range_ids: Iterable[str],
                  copy: bool, referenced: int) -> Iterator[_Counts]:
    """One Spark task: the ranges, then every object they reference.

    ``referenced`` is how many objects the whole commit references: what a listing
    of the destination namespace costs, in keys.
    """
    src_ranges = RangeManager(source.open(), source.namespace, cache_size=4)
    validator = CommitValidator(dest.open(), dest.namespace, concurrency=TASK_THREADS)
    out: _Counts = {"ranges_copied": 0, "objects_checked": 0, "objects_present": 0,
                    "objects_copied": 0, "missing_count": 0, "missing": []}

    def missing(item: MissingItem) -> None:
        out["missing_count"] += 1
        if len(out["missing"]) < MAX_LISTED_MISSING:
            out["missing"].append(_missing_dict(item))

    batches: list[tuple[int, list[tuple[str, Entry]]]] = []
    for rid in range_ids:
        if not _file_ok(dest, rid, is_range=True):
            if copy:
                _copy_file(source, dest, rid)
                out["ranges_copied"] += 1
            if not copy or not _file_ok(dest, rid, is_range=True):
                missing(MissingItem(MissingKind.RANGE, rid, dest.file_address(rid)))
        # entries come from the source's copy of the range (same id, same content)
        records = src_ranges.read_range(rid)
        batches.append((len(records), [(r.path, r.entry) for r in records
                                       if r.entry is not None]))
    found = [m for batch in validator.check_objects(batches, referenced=referenced)
             for m in batch]
    out["objects_checked"] = sum(len(changed) for _, changed in batches)
    out["objects_present"] = out["objects_checked"] - len(found)
    with ThreadPoolExecutor(max_workers=TASK_THREADS) as pool:
        for copied, item in pool.map(
                lambda m: _copy_object(validator, source, m, copy), found):
            out["objects_copied"] += copied
            if item is not None:
                missing(item)
    yield out


def _copy_object(validator: CommitValidator, source: StoreLocation, item: MissingItem,
                 copy: bool) -> tuple[bool, MissingItem | None]:
    """(copied, still missing) for one object found missing."""
    entry = item.entry
    assert entry is not None
    if not copy or entry.address_type is AddressType.FULL:
        return False, item  # imported objects are outside the namespaces
    src = join_address(source.namespace, entry.address)
    try:
        validator.store.put(item.address, source.open().get_stream(src))
    except StorageError as e:
        log.warning("copy of %s failed: %s", src, e)
        return False, item
    again = validator.check_object(item.key, entry)
    return again is None, again


class MirrorBackfill:
    """Validates, and optionally fills, a destination namespace with a commit's data.

    Args:
        spark: the session whose executors do the work.
        source: the source namespace and its store.
        dest: the mirror's namespace in the destination store.
    """

    def __init__(self, spark: SparkSession, source: StoreLocation, dest: StoreLocation
                 ) -> None:
        self.spark = spark
        self.source = source
        self.dest = dest

    def run(self, metarange: str, *, copy: bool = False,
            ranges_per_task: int = 4) -> BackfillReport:
        """Validate (with ``copy``: first fill) everything ``metarange`` needs.

        Raises:
            RangeNotFoundError: the metarange or a range is missing in the *source*.
        """
        report = BackfillReport(metarange, copy)
        if metarange == EMPTY_METARANGE_ID:
            return report
        src_ranges = RangeManager(self.source.open(), self.source.namespace)
        infos = src_ranges.get_metarange(metarange).ranges
        range_ids = [r.id for r in infos]
        referenced = sum(r.count for r in infos)
        report.ranges = len(range_ids)
        if range_ids:
            source, dest = self.source, self.dest
            slices = max(1, (len(range_ids) + ranges_per_task - 1) // ranges_per_task)
            parts = self.spark.sparkContext.parallelize(range_ids, slices).mapPartitions(
                lambda ids: _check_ranges(source, dest, ids, copy, referenced)).collect()
            for part in parts:
                report.add(part)
        if not _file_ok(self.dest, metarange, is_range=False):
            if copy and report.complete:  # the metarange goes last, after its ranges
                _copy_file(self.source, self.dest, metarange)
            if not _file_ok(self.dest, metarange, is_range=False):
                report.missing_count += 1
                report.missing.insert(0, {"kind": "metarange", "key": metarange,
                                          "address": self.dest.file_address(metarange),
                                          "reason": "missing"})
        log.info("backfill of %s into %s: %d ranges (%d copied), %d objects checked, "
                 "%d copied, %d missing", metarange, self.dest.namespace, report.ranges,
                 report.ranges_copied, report.objects_checked, report.objects_copied,
                 report.missing_count)
        return report


def backfill_commit(spark: SparkSession, server: ServerOptions, repository: str, ref: str,
                    source_storage: StorageOptions, dest: StoreLocation, *,
                    copy: bool = False, ranges_per_task: int = 4) -> BackfillReport:
    """Resolve ``ref`` of a source repository and backfill its commit into ``dest``.

    Raises:
        NotFoundError: no such repository or ref at the source.
    """
    with LakeFSClient(server) as client:
        repo = client.get_repository(repository)
        commit = client.get_commit(repository, ref)
    source = StoreLocation(source_storage, repo.storage_namespace)
    return MirrorBackfill(spark, source, dest).run(commit.metarange_id, copy=copy,
                                                   ranges_per_task=ranges_per_task)


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """``python -m lakefs_core.spark.backfill``: validate (``--copy``: fill) a new mirror.

    Source server and storage options come from ``--option NAME=VALUE`` (the data
    source's names) and ``LAKECTL_*``; the destination store from
    ``--option dest_NAME=VALUE`` (e.g. ``dest_blockstore_root``, ``dest_s3_endpoint``).
    Exits 0 when the destination holds everything the commit needs.
    """
    parser = job_parser("python -m lakefs_core.spark.backfill", main.__doc__)
    parser.add_argument("repository")
    parser.add_argument("ref")
    parser.add_argument("dest_namespace", help="the mirror's storage namespace")
    parser.add_argument("--copy", action="store_true", help="copy what is missing")
    args = parser.parse_args(argv)
    options = option_pairs(args.option)
    dest = StoreLocation(StorageOptions.from_options(options, prefix="dest_"),
                         args.dest_namespace)
    with job_session(args.master, "lakefs-backfill", spark) as session:
        report = backfill_commit(session, ServerOptions.from_options(options), args.repository,
                                 args.ref, StorageOptions.from_options(options), dest,
                                 copy=args.copy)
    print_report(report.to_dict())
    return 0 if report.complete else 1


if __name__ == "__main__":
    sys.exit(main())
