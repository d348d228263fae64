"""Garbage collection rules, and which commits they keep (lakeFS's retention).

A repository's :class:`~lakefs_core.graveler.model.GarbageCollectionRules` say how
many days each branch keeps the commits it replaced. On a branch, the head is kept,
and so is every ancestor that was still current within the branch's retention
window: one created within the window, or one that a commit created within the
window replaced (its parent). A commit on several branches is kept if any of them
keeps it (the longest retention wins). A commit no branch reaches (a deleted
branch's) is kept while it is younger than the default retention.

:class:`GarbageCollectionService` stores the rules and writes what a garbage
collection run needs: the commits CSV under
``<namespace>/_lakefs/retention/gc/commits/run_id=<run id>/commits.csv`` with
lakeFS's columns ``commit_id,expired,metarange_id``. Mirror repositories (read-only)
refuse both: a mirror loses objects only when its source does.

The commits CSV can also be written in the background (a recorded task whose id is
the run id), and the uncommitted objects (every staged address of every branch) are
written as a Parquet file with lakeFS's columns ``physical_address`` (relative to the
namespace) and ``creation_date`` (Unix seconds) under
``<namespace>/_lakefs/retention/gc/uncommitted/<run id>/uncommitted/``.
"""

from __future__ import annotations

import csv
import io
import logging
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from lakefs_core.block.base import join_address
from lakefs_core.errors import NotFoundError, ValidationError
from lakefs_core.graveler.core import all_branches, all_commits
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import (
    AddressType,
    Commit,
    GarbageCollectionRules,
    Repository,
    RepositoryTask,
    TaskKind,
)
from lakefs_core.graveler.refs import validate_branch_name

log = logging.getLogger("lakefs_core.graveler.retention")

#: objects younger than this are never collected: a write may be about to stage them
GC_GRACE_PERIOD_SECONDS = 6 * 3600
#: lakeFS keeps retention days as a 32-bit integer
MAX_RETENTION_DAYS = 2**31 - 1
#: the commits CSV's header, as lakeFS writes it
COMMITS_CSV_COLUMNS = ("commit_id", "expired", "metarange_id")
#: where lakeFS's GC job writes the addresses it found expired, below the namespace
ADDRESSES_PREFIX = "_lakefs/retention/gc/addresses/"

_DAY = 86_400
#: run ids sort newest first: they count down from the year 4000 (as lakeFS's do)
_YEAR_4000 = 64_060_588_800


def commits_csv_key(run_id: str) -> str:
    """Where a run's commits CSV is, below the storage namespace."""
    return f"_lakefs/retention/gc/commits/run_id={run_id}/commits.csv"


def uncommitted_prefix(run_id: str) -> str:
    """Where a run's uncommitted objects are, below the storage namespace."""
    return f"_lakefs/retention/gc/uncommitted/{run_id}/uncommitted/"


def validate_gc_rules(default_retention_days: int,
                      branches: Iterable[tuple[str, int]]) -> GarbageCollectionRules:
    """Rules from lakeFS's request fields, checked.

    Raises:
        ValidationError: negative or too large days, an invalid branch name, or a
            branch named twice.
    """
    _check_days("default_retention_days", default_retention_days)
    per_branch: dict[str, int] = {}
    for branch, days in branches:
        validate_branch_name(branch)
        _check_days(f"retention_days of branch {branch!r}", days)
        if branch in per_branch:
            raise ValidationError(f"branch {branch!r} has more than one garbage collection rule")
        per_branch[branch] = days
    return GarbageCollectionRules(default_retention_days, per_branch)


def _check_days(what: str, days: int) -> None:
    if isinstance(days, bool) or not isinstance(days, int):
        raise ValidationError(f"{what} must be a whole number of days")
    if days < 0:
        raise ValidationError(f"{what} must not be negative, got {days}")
    if days > MAX_RETENTION_DAYS:
        raise ValidationError(f"{what} must be at most {MAX_RETENTION_DAYS}, got {days}")


class DatedCommit(Protocol):
    """What retention needs of a commit."""

    @property
    def id(self) -> str: ...

    @property
    def parents(self) -> Sequence[str]: ...

    @property
    def creation_date(self) -> int: ...


def retained_on_branch(log: Sequence[DatedCommit], head: str, retention_days: float,
                       now: float) -> set[str]:
    """The commits of one branch's log (every ancestor of ``head``) that are retained."""
    cutoff = now - retention_days * _DAY
    replaced_within: set[str] = set()
    for c in log:
        if c.creation_date >= cutoff:
            replaced_within.update(c.parents)
    return {head} | {c.id for c in log if c.creation_date >= cutoff or c.id in replaced_within}


@dataclass(frozen=True, slots=True)
class _Dated:
    id: str
    parents: tuple[str, ...]
    creation_date: int


@dataclass(frozen=True)
class GarbageCollectionCommits:
    """Which commits of a repository a run keeps and which it lets expire."""

    retained: frozenset[str]
    expired: frozenset[str]


def garbage_collection_commits(heads: Mapping[str, str], commits: Mapping[str, Commit],
                               rules: GarbageCollectionRules,
                               now: float) -> GarbageCollectionCommits:
    """Split every commit of a repository into retained and expired.

    Args:
        heads: branch name -> head commit id (branches with no commit are left out).
        commits: every commit record of the repository by id.
        rules: the repository's rules.
        now: the time retention is measured from.
    """
    retained: set[str] = set()
    reachable: set[str] = set()
    for branch, head in heads.items():
        log = [_Dated(c, tuple(commits[c].parents), commits[c].creation_date)
               for c in _ancestors(head, commits)]
        reachable.update(c.id for c in log)
        retained |= retained_on_branch(log, head, rules.days_for(branch), now)
    default_cutoff = now - rules.default_retention_days * _DAY
    retained.update(c for c in commits
                    if c not in reachable and commits[c].creation_date >= default_cutoff)
    retained &= commits.keys()
    return GarbageCollectionCommits(frozenset(retained), frozenset(commits.keys() - retained))


def _ancestors(head: str, commits: Mapping[str, Commit]) -> Iterator[str]:
    seen = {head}
    stack = [head]
    while stack:
        cid = stack.pop()
        if cid not in commits:
            continue
        yield cid
        for parent in commits[cid].parents:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)


def commits_csv(split: GarbageCollectionCommits, commits: Mapping[str, Commit]) -> bytes:
    """The commits CSV: lakeFS's header, then every commit, retained ones first."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COMMITS_CSV_COLUMNS)
    for expired, ids in ((False, split.retained), (True, split.expired)):
        for cid in sorted(ids):
            writer.writerow((cid, "true" if expired else "false", commits[cid].metarange_id))
    return out.getvalue().encode()


@dataclass(frozen=True)
class PreparedRun:
    """What :meth:`GarbageCollectionService.prepare_commits` wrote."""

    run_id: str
    commits_location: str
    addresses_location: str
    commits: GarbageCollectionCommits


class GarbageCollectionService:
    """A repository's garbage collection rules and the preparation of a run.

    Args:
        graveler: the engine (retention is measured from its clock).
    """

    def __init__(self, graveler: Graveler) -> None:
        self._graveler = graveler
        self._refstore = graveler.refstore

    def get_rules(self, repo_id: str) -> GarbageCollectionRules:
        """Raises RepositoryNotFoundError, or NotFoundError when no rules are set."""
        self._refstore.get_repository(repo_id)
        rules = self._refstore.get_gc_rules(repo_id)
        if rules is None:
            raise NotFoundError("no garbage collection rules")
        return rules

    def set_rules(self, repo_id: str, rules: GarbageCollectionRules) -> None:
        """Raises RepositoryNotFoundError, ReadOnlyRepositoryError (a mirror)."""
        self._graveler.writable_repository(repo_id)
        self._refstore.set_gc_rules(repo_id, rules)

    def delete_rules(self, repo_id: str) -> None:
        """Remove the rules (none set is fine). Raises as :meth:`set_rules`."""
        self._graveler.writable_repository(repo_id)
        self._refstore.set_gc_rules(repo_id, None)

    def prepare_commits(self, repo_id: str, run_id: str = "") -> PreparedRun:
        """Write the commits CSV of a new run, from the repository's rules.

        Raises:
            RepositoryNotFoundError: no such repository.
            NotFoundError: the repository has no garbage collection rules.
            ReadOnlyRepositoryError: the repository is a mirror.
        """
        repo = self._graveler.writable_repository(repo_id)
        rules = self.get_rules(repo_id)
        # branches first: a commit made meanwhile is found by the commit listing
        heads = {b.name: b.commit_id for b in all_branches(self._refstore, repo_id) if b.commit_id}
        commits = {rec.id: rec.commit for rec in all_commits(self._refstore, repo_id)}
        now = self._graveler.clock()
        split = garbage_collection_commits(heads, commits, rules, now)
        run_id = run_id or self._new_run_id()
        where = run_locations(repo, run_id)
        self._graveler.store_for(repo.storage_id).put(where.commits_location,
                                                      commits_csv(split, commits))
        return PreparedRun(run_id=run_id, commits_location=where.commits_location,
                           addresses_location=where.addresses_location, commits=split)

    def _new_run_id(self) -> str:
        return f"{_YEAR_4000 - int(self._graveler.clock()):011d}{secrets.token_hex(6)}"

    # --- in the background ------------------------------------------------------------
    def submit_prepare_commits(self, repo_id: str) -> RepositoryTask:
        """Record a task that will write a run's commits CSV (its id is the run id).

        Raises as :meth:`prepare_commits` when the run could not start.
        """
        self._graveler.writable_repository(repo_id)
        self.get_rules(repo_id)
        task = RepositoryTask(id=self._new_run_id(), kind=TaskKind.GC_PREPARE_COMMITS,
                              done=False, update_time=self._graveler.clock())
        self._refstore.put_task(repo_id, task)
        return task

    def run_prepare_commits(self, repo_id: str, task: RepositoryTask) -> RepositoryTask:
        """Write the submitted run and record how it ended (an error is recorded)."""
        error = ""
        try:
            self.prepare_commits(repo_id, run_id=task.id)
        except Exception as exc:  # noqa: BLE001 - recorded for the status request
            log.warning("garbage collection run %s of %s failed: %s", task.id, repo_id, exc)
            error = str(exc) or type(exc).__name__
        finished = replace(task, done=True, update_time=self._graveler.clock(), error=error)
        self._refstore.put_task(repo_id, finished)
        return finished

    def prepare_commits_status(self, repo_id: str, task_id: str
                               ) -> tuple[RepositoryTask, PreparedLocations]:
        """A background run's task and where it writes.

        Raises:
            RepositoryNotFoundError: no such repository.
            NotFoundError: no such task.
        """
        repo = self._refstore.get_repository(repo_id)
        task = self._refstore.get_task(repo_id, task_id)
        if task is None or task.kind is not TaskKind.GC_PREPARE_COMMITS:
            raise NotFoundError(f"task {task_id!r} not found")
        return task, run_locations(repo, task.id)

    # --- uncommitted ------------------------------------------------------------------
    def prepare_uncommitted(self, repo_id: str) -> tuple[str, str]:
        """Write every staged object of every branch (its address and creation time) as
        one Parquet file of a new run; the run id and the location of its files.

        Raises:
            RepositoryNotFoundError: no such repository.
            ReadOnlyRepositoryError: the repository is a mirror.
        """
        repo = self._graveler.writable_repository(repo_id)
        addresses: list[str] = []
        created: list[int] = []
        for branch in all_branches(self._refstore, repo_id):
            for token in (branch.staging_token, *branch.sealed_tokens):
                for rec in self._refstore.list_staged(repo_id, token):
                    entry = rec.entry
                    if entry is None or entry.address_type is not AddressType.RELATIVE:
                        continue  # a staged delete, or an object outside the namespace
                    addresses.append(entry.address)
                    created.append(int(entry.mtime))
        table = pa.table({"physical_address": pa.array(addresses, pa.string()),
                          "creation_date": pa.array(created, pa.int64())})
        sink = io.BytesIO()
        pq.write_table(table, sink)
        run_id = self._new_run_id()
        location = join_address(repo.storage_namespace, uncommitted_prefix(run_id))
        self._graveler.store_for(repo.storage_id).put(
            join_address(location, "part-00000.parquet"), sink.getvalue())
        return run_id, location


@dataclass(frozen=True)
class PreparedLocations:
    """Where a garbage collection run's commits CSV is, and where its job writes."""

    commits_location: str
    addresses_location: str


def run_locations(repo: Repository, run_id: str) -> PreparedLocations:
    """The locations of run ``run_id`` of ``repo``."""
    return PreparedLocations(
        commits_location=join_address(repo.storage_namespace, commits_csv_key(run_id)),
        addresses_location=join_address(repo.storage_namespace, ADDRESSES_PREFIX))


__all__ = [
    "COMMITS_CSV_COLUMNS",
    "GC_GRACE_PERIOD_SECONDS",
    "GarbageCollectionCommits",
    "GarbageCollectionService",
    "PreparedLocations",
    "PreparedRun",
    "commits_csv",
    "commits_csv_key",
    "garbage_collection_commits",
    "retained_on_branch",
    "run_locations",
    "uncommitted_prefix",
    "validate_gc_rules",
]
