"""Immutable values of the versioning model: entries, ranges, metaranges, commits.

See docs/ARCHITECTURE.md ("The versioning model"). Ids are SHA-256 hex digests over
canonical encodings (see :mod:`lakefs_core.graveler.encoding`), so the same content
gives the same id in every region.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class AddressType(StrEnum):
    """How an entry's physical address is to be read."""

    RELATIVE = "relative"  # relative to the repository's storage namespace
    FULL = "full"  # an absolute URI (imported objects)


@dataclass(frozen=True, slots=True)
class Entry:
    """What a path points to at one version: one object in the store."""

    address: str
    size: int
    etag: str
    mtime: float
    address_type: AddressType = AddressType.RELATIVE
    content_type: str = "application/octet-stream"
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EntryRecord:
    """A path with its entry. ``entry is None`` is a tombstone (a staged delete)."""

    path: str
    entry: Entry | None


@dataclass(frozen=True, slots=True)
class RangeInfo:
    """A descriptor of one range file, as a metarange lists it."""

    id: str
    min_key: str
    max_key: str
    count: int
    estimated_size: int


@dataclass(frozen=True, slots=True)
class Metarange:
    """A metarange: its id and the sorted, non-overlapping ranges it lists."""

    id: str
    ranges: tuple[RangeInfo, ...]


@dataclass(frozen=True, slots=True)
class Commit:
    """A commit record. Its id is computed from every field but ``generation``."""

    parents: tuple[str, ...]
    metarange_id: str
    message: str
    committer: str
    creation_date: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    generation: int = 1


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A commit together with its id."""

    id: str
    commit: Commit


@dataclass(frozen=True, slots=True)
class Repository:
    id: str
    storage_namespace: str
    default_branch: str
    creation_date: int
    storage_id: str = ""
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch row: its head commit, its live staging token and any sealed tokens.

    ``sealed_tokens`` (newest first) hold staged changes that a commit in progress
    is applying; they are still visible to readers until the commit lands.
    """

    name: str
    commit_id: str
    staging_token: str
    sealed_tokens: tuple[str, ...] = ()
    sealed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class BranchUpdate:
    """One branch of a multi-branch compare-and-swap (:meth:`RefStore.update_branches`).

    ``expected`` is the branch row as read (the swap compares its commit, staging token
    and sealed tokens), or None to create ``new`` where no branch of that name exists.
    """

    repo_id: str
    expected: Branch | None
    new: Branch


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    commit_id: str


@dataclass(frozen=True, slots=True)
class MirrorMarking:
    """What makes a repository a mirror: the mirror it serves and where its source is.

    Set when replication creates the mirror repository; ``detached`` once an operator
    detached it (it is then an ordinary repository that still serves only commits
    proven present, plus its own).
    """

    mirror_id: str
    source_region: str
    source_repository: str
    detached: bool = False


@dataclass(frozen=True, slots=True)
class GarbageCollectionRules:
    """How long each branch of a repository keeps the commits it replaced, in days.

    Branches without a rule of their own keep them ``default_retention_days``.
    """

    default_retention_days: int
    branch_retention_days: Mapping[str, int] = field(default_factory=dict)

    def days_for(self, branch: str) -> int:
        return self.branch_retention_days.get(branch, self.default_retention_days)


@dataclass(frozen=True, slots=True)
class RefsDump:
    """Where a dump of a repository's refs is: one metarange per kind of ref."""

    commits_metarange_id: str
    tags_metarange_id: str
    branches_metarange_id: str


class TaskKind(StrEnum):
    """The long-running repository operations whose progress is recorded."""

    DUMP = "dump"
    RESTORE = "restore"
    #: a garbage collection run's commits CSV, written in the background
    GC_PREPARE_COMMITS = "gc_prepare_commits"


@dataclass(frozen=True, slots=True)
class RepositoryTask:
    """A dump or restore of a repository's refs (or the preparation of a garbage
    collection run, whose id is the run's), as far as it has come.

    ``refs`` is the dump a finished dump task wrote (or the one a restore reads).
    """

    id: str
    kind: TaskKind
    done: bool
    update_time: float
    error: str = ""
    refs: RefsDump | None = None


@dataclass(frozen=True, slots=True)
class ImportState:
    """An import's row: its progress and how it ended.

    Live while neither ``completed`` nor ``error``; ``committing`` once it started to
    move its branch (it can no longer be canceled then).
    """

    id: str
    branch: str
    updated_at: float
    ingested: int = 0
    metarange_id: str = ""
    commit_id: str = ""
    completed: bool = False
    committing: bool = False
    error: str = ""

    @property
    def live(self) -> bool:
        return not self.completed and not self.error


class PullRequestStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


@dataclass(frozen=True, slots=True)
class PullRequest:
    """A proposal to merge one branch into another, kept beside the refs.

    Dates are seconds since the epoch; ``closed_date`` is set once the request is
    closed or merged, ``merged_commit_id`` once merged.
    """

    id: str
    title: str
    description: str
    status: PullRequestStatus
    author: str
    source_branch: str
    destination_branch: str
    creation_date: float
    closed_date: float | None = None
    merged_commit_id: str | None = None


class DiffType(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class Difference:
    """One path that differs. ``left`` is the old entry, ``right`` the new one."""

    path: str
    type: DiffType
    left: Entry | None
    right: Entry | None


@dataclass(frozen=True, slots=True)
class HookRun:
    """One hook's run within an action run (lakeFS's HookRun), with its output."""

    hook_run_id: str
    action: str
    hook_id: str
    start_time: float
    end_time: float
    status: str  # "completed" or "failed"
    output: str = ""


@dataclass(frozen=True, slots=True)
class ActionRun:
    """The run of the actions matched by one event (lakeFS's ActionRun).

    Ids sort newest first. ``commit_id`` is the commit the operation made or acted on
    ("" until known: a pre-commit run learns it when the commit lands).
    """

    run_id: str
    event_type: str
    branch: str
    source_ref: str
    commit_id: str
    start_time: float
    end_time: float
    status: str  # "completed" or "failed"
