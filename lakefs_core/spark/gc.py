"""Garbage collection as a Spark job: delete data no retained commit and no staging area uses.

Retention is per branch, in days: the repository's garbage collection rules (set
through the API, ``/repositories/{repo}/settings/gc_rules``), or
:class:`RetentionRules` given to the job. On each branch, the head is retained, and so
is every commit that was still current within the branch's retention window: one
created within the window, or one that a commit created within the window replaced
(a child of it on that branch). Tagged commits are retained too (unless
``retain_tags`` is off). Everything else is expired.

The job then:

1. lists the objects under ``<namespace>/data/`` that are older than ``min_age``
   (the server's ``grace_period`` unless given: younger ones may belong to a write
   that is about to stage them);
2. reads the staged entries of every branch (through the API), then the commits:
   with the repository's rules, the server writes the run's commits CSV
   (``gc/prepare_commits``, as lakeFS does) and the job reads it; with rules given
   to the job, or a ``now`` to measure from, the job walks every branch's log
   itself. The server also keeps a commit no branch reaches (a deleted branch's)
   while it is younger than the default retention; the job's own walk sees only
   the branches' commits;
3. reads, **in Spark tasks**, the Parquet range files of every retained commit's
   metarange, keeping only the ``address`` column;
4. anti-joins: listed objects that no retained range and no staged entry points at
   are garbage; it reports them and, unless ``dry_run`` (the default), deletes them
   in Spark tasks.

Staged entries are read before commits, so an object committed while the job runs
is seen in one or the other. Imported objects (absolute addresses) and range files
are never touched. A read-only repository (a mirror) is refused: a mirror loses
objects only when its source does (deletions replicate from the source).
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.errors import ReadOnlyRepositoryError, ValidationError
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID
from lakefs_core.graveler.model import AddressType
from lakefs_core.graveler.ranges import RangeManager
from lakefs_core.graveler.retention import retained_on_branch
from lakefs_core.spark.cli import job_parser, job_session, option_pairs, print_report
from lakefs_core.spark.client import CommitInfo, LakeFSClient
from lakefs_core.spark.formats import open_input
from lakefs_core.spark.listing import iter_range_ids
from lakefs_core.spark.options import ServerOptions, StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("lakefs_core.spark.gc")

#: objects the server and the writer put under the namespace, relative to it
DATA_PREFIX = "data/"
#: the rules of a repository that has none set
DEFAULT_RETENTION_DAYS = 21.0


@dataclass(frozen=True)
class RetentionRules:
    """How long each branch keeps replaced commits.

    Attributes:
        default_retention_days: for branches without a rule of their own.
        branch_retention_days: per-branch retention, in days.
        retain_tags: keep tagged commits whatever their age.
    """

    default_retention_days: float = DEFAULT_RETENTION_DAYS
    branch_retention_days: Mapping[str, float] = field(default_factory=dict)
    retain_tags: bool = True

    def __post_init__(self) -> None:
        days = [self.default_retention_days, *self.branch_retention_days.values()]
        if any(d < 0 for d in days):
            raise ValidationError("retention days must not be negative")

    def days_for(self, branch: str) -> float:
        return self.branch_retention_days.get(branch, self.default_retention_days)


@dataclass
class GCReport:
    """What a run found (and deleted).

    Attributes:
        repository: the repository collected.
        dry_run: nothing was deleted.
        retained_commits: commits whose objects are kept.
        expired_commits: commits found on branches but not retained.
        objects_listed: objects under ``data/`` old enough to be considered.
        staged_objects: objects staged on some branch (kept).
        garbage: physical addresses of the unreferenced objects, sorted.
        garbage_bytes: their total size.
        deleted: how many were deleted (0 on a dry run).
    """

    repository: str
    dry_run: bool
    retained_commits: list[str]
    expired_commits: list[str]
    objects_listed: int
    staged_objects: int
    garbage: list[str]
    garbage_bytes: int
    deleted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _range_addresses(storage: StorageOptions, namespace: str,
                     range_ids: Iterable[str]) -> Iterator[str]:
    """Relative data addresses in some range files (a Spark task's work)."""
    store = storage.open(namespace)
    for rid in range_ids:
        address = join_address(namespace, f"_lakefs/{rid}")
        with open_input(store, address) as src:
            table = pq.read_table(src, columns=["address", "address_type"])
        kinds = table.column("address_type").to_pylist()
        for addr, kind in zip(table.column("address").to_pylist(), kinds, strict=True):
            if kind == AddressType.RELATIVE.value:
                yield addr


def _delete_addresses(storage: StorageOptions, namespace: str,
                      addresses: Iterable[str]) -> Iterator[int]:
    store = storage.open(namespace)
    n = 0
    for address in addresses:
        store.delete(address)
        n += 1
    yield n


class GarbageCollector:
    """Runs garbage collection of one server's repositories on a SparkSession.

    Args:
        spark: the session whose executors read ranges and delete objects.
        server: the server's API (refs, commits, staged entries).
        storage: how executors reach the repositories' object store.
    """

    def __init__(self, spark: SparkSession, server: ServerOptions,
                 storage: StorageOptions) -> None:
        self.spark = spark
        self.server = server
        self.storage = storage

    def run(self, repository: str, rules: RetentionRules | None = None, *,
            dry_run: bool = True, min_age_seconds: float | None = None,
            now: float | None = None, retain_tags: bool = True) -> GCReport:
        """Find (and unless ``dry_run``, delete) the repository's garbage.

        Args:
            repository: the repository to collect.
            rules: retention per branch (default: the repository's rules, with
                ``retain_tags``; 21 days everywhere if it has none).
            dry_run: only report (the default).
            min_age_seconds: never collect objects younger than this (default: the
                server's garbage collection grace period).
            now: the time retention is measured from (default: now, and then the
                server prepares the commits from the repository's rules).

        Raises:
            ReadOnlyRepositoryError: the repository is a read-only mirror.
            NotFoundError: no such repository.
        """
        with LakeFSClient(self.server) as client:
            repo = client.get_repository(repository)
            if repo.read_only:
                raise ReadOnlyRepositoryError(
                    f"repository {repository} is read-only (a mirror): garbage collection "
                    "runs on its source, whose deletions replicate to the mirror")
            if min_age_seconds is None:
                min_age_seconds = client.gc_grace_period()
            scan_time = time.time() if now is None else now
            namespace = repo.storage_namespace
            store = self.storage.open(namespace)
            listed = [(s.address, s.size) for s in store.list(join_address(namespace,
                                                                          DATA_PREFIX))
                      if s.mtime <= scan_time - min_age_seconds]
            staged = self._staged_addresses(client, repository, namespace)
            if rules is None:
                stored = client.get_gc_rules(repository)
                if stored is not None and now is None:
                    retained, expired = self._prepared_commits(client, repository, store,
                                                               retain_tags)
                elif stored is not None:
                    rules = RetentionRules(stored[0], stored[1], retain_tags)
                else:
                    rules = RetentionRules(retain_tags=retain_tags)
            if rules is not None:
                retained, expired = self._commits(client, repository, rules, scan_time)
        ranges = RangeManager(store, namespace)
        metaranges = sorted({mr for mr in retained.values()
                             if mr and mr != EMPTY_METARANGE_ID})
        range_ids = list(iter_range_ids(ranges, metaranges))
        garbage = self._garbage(namespace, listed, staged, range_ids)
        report = GCReport(repository=repository, dry_run=dry_run,
                          retained_commits=sorted(retained), expired_commits=sorted(expired),
                          objects_listed=len(listed), staged_objects=len(staged),
                          garbage=[a for a, _ in garbage],
                          garbage_bytes=sum(s for _, s in garbage))
        if not dry_run and garbage:
            report.deleted = self._delete(namespace, report.garbage)
        log.info("gc of %s: %d retained commits, %d expired, %d of %d objects are garbage "
                 "(%d bytes), %d deleted", repository, len(retained), len(expired),
                 len(garbage), len(listed), report.garbage_bytes, report.deleted)
        return report

    def _staged_addresses(self, client: LakeFSClient, repository: str,
                          namespace: str) -> set[str]:
        prefix = namespace.rstrip("/") + "/"
        staged = set()
        for branch, _ in client.list_branches(repository):
            for change in client.uncommitted(repository, branch):
                if change.type == "removed":
                    continue
                address = client.stat_object(repository, branch, change.path)["physical_address"]
                staged.add(address[len(prefix):] if address.startswith(prefix) else address)
        return staged

    def _commits(self, client: LakeFSClient, repository: str, rules: RetentionRules,
                 now: float) -> tuple[dict[str, str], set[str]]:
        """Retained commits (id -> metarange id) and expired ones, from the branches' logs."""
        seen: dict[str, CommitInfo] = {}
        retained: set[str] = set()
        for branch, head in client.list_branches(repository):
            branch_log = list(client.log(repository, head))
            seen.update((c.id, c) for c in branch_log)
            retained |= retained_on_branch(branch_log, head, rules.days_for(branch), now)
        metaranges = {c.id: c.metarange_id for c in seen.values()}
        if rules.retain_tags:
            self._retain_tags(client, repository, metaranges, retained)
        return {c: metaranges[c] for c in retained}, set(seen) - retained

    def _prepared_commits(self, client: LakeFSClient, repository: str, store: BlockStore,
                          retain_tags: bool) -> tuple[dict[str, str], set[str]]:
        """Retained and expired commits as the server's commits CSV of a new run says."""
        run = client.prepare_gc_commits(repository)
        rows = csv.DictReader(io.StringIO(store.get(run["gc_commits_location"]).decode()))
        metaranges: dict[str, str] = {}
        retained: set[str] = set()
        for row in rows:
            metaranges[row["commit_id"]] = row["metarange_id"]
            if row["expired"] != "true":
                retained.add(row["commit_id"])
        log.info("gc of %s: run %s, commits from %s", repository, run["run_id"],
                 run["gc_commits_location"])
        if retain_tags:
            self._retain_tags(client, repository, metaranges, retained)
        return {c: metaranges[c] for c in retained}, set(metaranges) - retained

    @staticmethod
    def _retain_tags(client: LakeFSClient, repository: str, metaranges: dict[str, str],
                     retained: set[str]) -> None:
        for _tag, commit_id in client.list_tags(repository):
            if commit_id not in metaranges:
                metaranges[commit_id] = client.get_commit(repository, commit_id).metarange_id
            retained.add(commit_id)

    def _garbage(self, namespace: str, listed: list[tuple[str, int]], staged: set[str],
                 range_ids: list[str]) -> list[tuple[str, int]]:
        """Listed objects that no range and no staged entry points at (a Spark join)."""
        if not listed:
            return []
        spark, storage = self.spark, self.storage
        prefix = namespace.rstrip("/") + "/"
        sc = spark.sparkContext
        slices = max(1, min(len(range_ids), sc.defaultParallelism * 4))
        referenced = sc.parallelize(range_ids, slices).mapPartitions(
            lambda ids: ((a,) for a in _range_addresses(storage, namespace, ids)))
        referenced_df = spark.createDataFrame(referenced, "address string")
        staged_df = spark.createDataFrame([(a,) for a in sorted(staged)], "address string")
        candidates = spark.createDataFrame(
            [(addr[len(prefix):], addr, size) for addr, size in listed],
            "address string, physical_address string, size long")
        garbage = (candidates.join(referenced_df, "address", "left_anti")
                   .join(staged_df, "address", "left_anti"))
        return sorted((r["physical_address"], r["size"]) for r in garbage.collect())

    def _delete(self, namespace: str, addresses: list[str]) -> int:
        storage = self.storage
        sc = self.spark.sparkContext
        slices = max(1, min(len(addresses) // 1000 + 1, sc.defaultParallelism * 4))
        return int(sc.parallelize(addresses, slices).mapPartitions(
            lambda batch: _delete_addresses(storage, namespace, batch)).sum())


def collect_garbage(spark: SparkSession, server: ServerOptions, storage: StorageOptions,
                    repository: str, rules: RetentionRules | None = None, *,
                    dry_run: bool = True, min_age_seconds: float | None = None,
                    now: float | None = None, retain_tags: bool = True) -> GCReport:
    """One garbage collection run; see :meth:`GarbageCollector.run`."""
    return GarbageCollector(spark, server, storage).run(
        repository, rules, dry_run=dry_run, min_age_seconds=min_age_seconds, now=now,
        retain_tags=retain_tags)


# --- command line ---------------------------------------------------------------------
def _parse_branch_rule(text: str) -> tuple[str, float]:
    branch, sep, days = text.rpartition("=")
    if not sep or not branch:
        raise argparse.ArgumentTypeError(f"expected BRANCH=DAYS, got {text!r}")
    try:
        return branch, float(days)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected BRANCH=DAYS, got {text!r}") from None


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """``python -m lakefs_core.spark.gc``: report (or ``--delete``) a repository's garbage.

    Server and storage options come from ``--option NAME=VALUE`` (the data source's
    option names) and the ``LAKECTL_*`` environment variables.
    """
    parser = job_parser("python -m lakefs_core.spark.gc", main.__doc__)
    parser.add_argument("repository")
    parser.add_argument("--retention-days", type=float, default=None,
                        help="default retention (without this and --branch: the "
                             "repository's garbage collection rules)")
    parser.add_argument("--branch", action="append", type=_parse_branch_rule, default=[],
                        metavar="BRANCH=DAYS", help="retention of one branch")
    parser.add_argument("--no-retain-tags", action="store_true")
    parser.add_argument("--min-age-hours", type=float, default=None,
                        help="default: the server's garbage collection grace period")
    parser.add_argument("--delete", action="store_true", help="delete (default: dry run)")
    args = parser.parse_args(argv)
    options = option_pairs(args.option)
    rules = None
    if args.retention_days is not None or args.branch:
        days = DEFAULT_RETENTION_DAYS if args.retention_days is None else args.retention_days
        rules = RetentionRules(days, dict(args.branch), not args.no_retain_tags)
    min_age = None if args.min_age_hours is None else args.min_age_hours * 3600
    with job_session(args.master, "lakefs-gc", spark) as session:
        report = collect_garbage(
            session, ServerOptions.from_options(options), StorageOptions.from_options(options),
            args.repository, rules, dry_run=not args.delete, min_age_seconds=min_age,
            retain_tags=not args.no_retain_tags)
    print_report(report.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
