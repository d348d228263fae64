"""The refstore interface: repositories, branches, tags, commits and staging.

One implementation on SQLAlchemy serves SQLite and PostgreSQL, another DynamoDB. Branch
moves are compare-and-swap so that concurrent writers never lose an update.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Self

from lakefs_core.errors import BranchNotFoundError, ValidationError
from lakefs_core.graveler.model import (
    ActionRun,
    Branch,
    BranchUpdate,
    Commit,
    CommitRecord,
    EntryRecord,
    GarbageCollectionRules,
    HookRun,
    ImportState,
    MirrorMarking,
    PullRequest,
    PullRequestStatus,
    Repository,
    RepositoryTask,
    Tag,
)

#: the most branches one multi-branch read or swap takes (a DynamoDB transaction's
#: items, a repository check included for each branch)
MAX_BRANCHES_AT_ONCE = 50


def check_branch_updates(updates: Sequence[BranchUpdate]) -> None:
    """Raise ValidationError for a rename, a branch named twice, or too many branches."""
    if len(updates) > MAX_BRANCHES_AT_ONCE:
        raise ValidationError(f"at most {MAX_BRANCHES_AT_ONCE} branches move at once")
    seen: set[tuple[str, str]] = set()
    for u in updates:
        if u.expected is not None and u.expected.name != u.new.name:
            raise ValidationError(
                f"cannot rename branch {u.expected.name!r} to {u.new.name!r}")
        if (u.repo_id, u.new.name) in seen:
            raise ValidationError(f"branch {u.new.name!r} of {u.repo_id!r} named twice")
        seen.add((u.repo_id, u.new.name))


def check_branch_refs(refs: Sequence[tuple[str, str]]) -> None:
    """Raise ValidationError when more branches are asked for than one read takes."""
    if len(set(refs)) > MAX_BRANCHES_AT_ONCE:
        raise ValidationError(f"at most {MAX_BRANCHES_AT_ONCE} branches are read at once")


class RefStore(ABC):
    """Durable state of the versioning engine (everything but range files)."""

    #: whether :meth:`stage_on_branch` made :func:`~lakefs_core.database.without_waiting`
    #: raises :class:`~lakefs_core.database.WouldWait` instead of waiting for a lock
    stages_without_waiting: bool = False

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections and other resources. The store must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- repositories ---------------------------------------------------------
    @abstractmethod
    def create_repository(self, repo: Repository, default_branch: Branch,
                          mirror: MirrorMarking | None = None,
                          initial_commit: tuple[str, Commit] | None = None) -> None:
        """Create a repository with its default branch, mirror marking and first commit
        (id and record), atomically.

        Raises RepositoryExistsError.
        """

    @abstractmethod
    def get_repository(self, repo_id: str) -> Repository:
        """Raises RepositoryNotFoundError."""

    @abstractmethod
    def list_repositories(
        self, prefix: str = "", after: str = "", amount: int = 1000
    ) -> list[Repository]:
        """Repositories with id starting with ``prefix`` and greater than ``after``, sorted."""

    @abstractmethod
    def delete_repository(self, repo_id: str) -> None:
        """Delete a repository and every branch, tag, commit and staged entry of it."""

    @abstractmethod
    def update_repository(self, repo: Repository) -> None:
        """Replace mutable repository fields (read_only). Raises RepositoryNotFoundError."""

    @abstractmethod
    def get_repository_metadata(self, repo_id: str) -> dict[str, str]: ...

    @abstractmethod
    def set_repository_metadata(self, repo_id: str, metadata: Mapping[str, str]) -> None:
        """Merge ``metadata`` into the repository's metadata."""

    @abstractmethod
    def delete_repository_metadata(self, repo_id: str, keys: list[str]) -> None: ...

    # --- branch protection rules and hidden branches ----------------------------
    @abstractmethod
    def get_branch_protection_rules(self, repo_id: str) -> tuple[str, ...]:
        """The repository's protection patterns; empty when none (or no repository)."""

    @abstractmethod
    def set_branch_protection_rules(self, repo_id: str, patterns: Sequence[str]) -> None:
        """Replace the repository's protection patterns. Raises RepositoryNotFoundError."""

    @abstractmethod
    def is_branch_hidden(self, repo_id: str, name: str) -> bool:
        """Whether the branch is left out of default listings."""

    @abstractmethod
    def set_branch_hidden(self, repo_id: str, name: str, hidden: bool) -> None:
        """Mark a branch hidden, or not (deleting a branch clears its mark)."""

    # --- ephemeral branches ----------------------------------------------------------
    @abstractmethod
    def get_branch_expiry(self, repo_id: str, name: str) -> int | None:
        """When the branch expires (unix seconds); None when it does not."""

    @abstractmethod
    def set_branch_expiry(self, repo_id: str, name: str, expires_at: int | None) -> None:
        """Set or clear (None) a branch's expiry (deleting a branch clears it).

        Raises:
            RepositoryNotFoundError.
        """

    @abstractmethod
    def list_expired_branches(self, now: int, amount: int = 1000) -> list[tuple[str, str]]:
        """(repository, branch) of the branches whose expiry is at or before ``now``,
        soonest expired first, in every writable repository (neither a read-only one's
        branches nor a default branch)."""

    # --- garbage collection rules ---------------------------------------------------
    @abstractmethod
    def get_gc_rules(self, repo_id: str) -> GarbageCollectionRules | None:
        """The repository's garbage collection rules; None when none are set."""

    @abstractmethod
    def set_gc_rules(self, repo_id: str, rules: GarbageCollectionRules | None) -> None:
        """Replace the repository's rules (None removes them). Raises RepositoryNotFoundError."""

    # --- dump and restore tasks --------------------------------------------------------
    @abstractmethod
    def put_task(self, repo_id: str, task: RepositoryTask) -> None:
        """Record a task's progress, replacing its earlier record.

        Raises RepositoryNotFoundError.
        """

    @abstractmethod
    def get_task(self, repo_id: str, task_id: str) -> RepositoryTask | None:
        """A task of the repository; None if unknown."""

    # --- link addresses ------------------------------------------------------------
    @abstractmethod
    def put_link_address(self, repo_id: str, address: str, *, expires_at: float,
                         now: float) -> None:
        """Record an address handed out for a client to write to and then link, and drop
        the repository's records that expired before ``now`` (so that the records of a
        repository never outnumber the addresses handed out within one expiry period).

        Raises RepositoryNotFoundError.
        """

    @abstractmethod
    def get_link_address(self, repo_id: str, address: str) -> float | None:
        """The expiry time of a handed-out address not yet taken; None if there is none."""

    @abstractmethod
    def take_link_address(self, repo_id: str, address: str) -> float | None:
        """Remove the record of a handed-out address and return its expiry time; None if
        there is none (never handed out, or already taken). Of concurrent callers, one
        gets the record."""

    # --- mirrors ------------------------------------------------------------------
    @abstractmethod
    def get_mirror_marking(self, repo_id: str) -> MirrorMarking | None:
        """The repository's mirror marking; None for other repositories."""

    @abstractmethod
    def set_mirror_marking(self, repo_id: str, marking: MirrorMarking) -> None:
        """Set or replace the repository's mirror marking. Raises RepositoryNotFoundError."""

    @abstractmethod
    def mark_commit_present(self, repo_id: str, commit_id: str) -> None:
        """Record that every piece of a commit is present in the repository (idempotent)."""

    @abstractmethod
    def is_commit_present(self, repo_id: str, commit_id: str) -> bool:
        """Whether :meth:`mark_commit_present` recorded the commit."""

    # --- imports ----------------------------------------------------------------
    @abstractmethod
    def create_import(self, repo_id: str, state: ImportState) -> None:
        """Record a new import. Raises RepositoryNotFoundError."""

    @abstractmethod
    def get_import(self, repo_id: str, import_id: str) -> ImportState:
        """Raises ImportNotFoundError."""

    @abstractmethod
    def update_import(self, repo_id: str, state: ImportState) -> bool:
        """Replace a live import's row; False (and nothing written) if it is no longer
        live (canceled, failed or completed)."""

    @abstractmethod
    def cancel_import(self, repo_id: str, import_id: str, error: str) -> None:
        """End a live import that is not committing with ``error``.

        Raises:
            ImportNotFoundError: no such import.
            ConflictError: it completed, failed, was canceled or is committing.
        """

    # --- pull requests ---------------------------------------------------------
    @abstractmethod
    def create_pull_request(self, repo_id: str, pr: PullRequest) -> None:
        """Raises RepositoryNotFoundError; AlreadyExistsError if the id is taken."""

    @abstractmethod
    def get_pull_request(self, repo_id: str, pr_id: str) -> PullRequest:
        """Raises PullRequestNotFoundError."""

    @abstractmethod
    def list_pull_requests(self, repo_id: str, *, prefix: str = "", after: str = "",
                           amount: int = 1000,
                           statuses: frozenset[PullRequestStatus] | None = None
                           ) -> list[PullRequest]:
        """Pull requests with id starting with ``prefix`` and after ``after``, by id;
        only those of ``statuses`` when given."""

    @abstractmethod
    def update_pull_request(self, repo_id: str, expected: PullRequest,
                            new: PullRequest) -> None:
        """Replace a pull request if its status is still ``expected``'s.

        Raises:
            PullRequestNotFoundError: no such pull request.
            PullRequestChangedError: its status changed since ``expected`` was read.
        """

    # --- action runs -----------------------------------------------------------
    @abstractmethod
    def put_action_run(self, repo_id: str, run: ActionRun, hooks: Sequence[HookRun]) -> None:
        """Record a finished run and its hooks' runs. Raises RepositoryNotFoundError."""

    @abstractmethod
    def set_action_run_commit(self, repo_id: str, run_id: str, commit_id: str) -> None:
        """Name the commit a run's operation made (no-op for an unknown run)."""

    @abstractmethod
    def get_action_run(self, repo_id: str, run_id: str) -> ActionRun:
        """Raises ActionRunNotFoundError."""

    @abstractmethod
    def list_action_runs(self, repo_id: str, *, after: str = "", amount: int = 1000,
                         branch: str | None = None, commit_id: str | None = None
                         ) -> list[ActionRun]:
        """Runs by id (newest first), after ``after``; of a branch or commit when given."""

    @abstractmethod
    def list_hook_runs(self, repo_id: str, run_id: str, *, after: str = "",
                       amount: int = 1000) -> list[HookRun]:
        """A run's hook runs by id (their output left empty)."""

    @abstractmethod
    def get_hook_run(self, repo_id: str, run_id: str, hook_run_id: str) -> HookRun:
        """A hook run with its output. Raises ActionRunNotFoundError."""

    # --- branches --------------------------------------------------------------
    @abstractmethod
    def create_branch(self, repo_id: str, branch: Branch) -> None:
        """Raises BranchExistsError."""

    @abstractmethod
    def get_branch(self, repo_id: str, name: str) -> Branch:
        """Raises BranchNotFoundError."""

    def get_write_target(
        self, repo_id: str, branch_name: str
    ) -> tuple[Repository, tuple[str, ...], Branch | None]:
        """The repository, its protection patterns and a branch (None if missing).

        What a direct write to a branch checks, read at once. Stores override this to
        read it in one round trip.

        Raises RepositoryNotFoundError.
        """
        repo = self.get_repository(repo_id)
        rules = self.get_branch_protection_rules(repo_id)
        try:
            branch = self.get_branch(repo_id, branch_name)
        except BranchNotFoundError:
            return repo, rules, None
        return repo, rules, branch

    def get_branch_and_staged(
        self, repo_id: str, branch_name: str, path: str
    ) -> tuple[Branch, EntryRecord | None] | None:
        """A branch and the record staged at ``path`` on it, or None if no such branch.

        The record (maybe a tombstone) is the live token's, else the first sealed
        token's that has one; None if nothing is staged at ``path``. What a read of
        an object on a branch needs first; stores override this to read it at once.
        """
        try:
            branch = self.get_branch(repo_id, branch_name)
        except BranchNotFoundError:
            return None
        for token in (branch.staging_token, *branch.sealed_tokens):
            record = self.get_staged(repo_id, token, path)
            if record is not None:
                return branch, record
        return branch, None

    def get_repository_and_staged(
        self, repo_id: str, branch_name: str, path: str
    ) -> tuple[Repository, tuple[Branch, EntryRecord | None] | None]:
        """The repository and :meth:`get_branch_and_staged`'s answer: what a read of an
        object by ref needs first. Stores override this to read it at once.

        Raises RepositoryNotFoundError.
        """
        return self.get_repository(repo_id), self.get_branch_and_staged(repo_id, branch_name,
                                                                        path)

    @abstractmethod
    def list_branches(self, repo_id: str, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Branch]: ...

    @abstractmethod
    def delete_branch(self, repo_id: str, name: str) -> None:
        """Raises BranchNotFoundError."""

    @abstractmethod
    def update_branch(self, repo_id: str, expected: Branch, new: Branch, *,
                      writable: bool = False) -> None:
        """Compare-and-swap: replace the branch only if it still equals ``expected``.

        The comparison is on (commit_id, staging_token, sealed_tokens). With
        ``writable``, the swap also requires the repository not to be read-only, checked
        atomically with it: a write that checked the repository before a switchover froze
        it cannot land after the freeze.

        Raises:
            BranchNotFoundError: the branch is gone.
            BranchChangedError: the branch moved since ``expected`` was read.
            ReadOnlyRepositoryError: ``writable`` and the repository is read-only.
        """

    @abstractmethod
    def get_branches(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        """Several branches, of one or several repositories, read at one snapshot.

        ``refs`` are ``(repository, branch)`` pairs; a branch (or repository) that does
        not exist is left out of the answer. No commit seen on one branch is seen
        without every commit that reached another of the branches before it: one SQL
        statement, or one DynamoDB TransactGetItems (at most 100 pairs).
        """

    @abstractmethod
    def update_branches(self, updates: Sequence[BranchUpdate]) -> None:
        """Compare-and-swap several branches, of one or several repositories, in one
        transaction: every branch moves, or none does.

        Raises:
            BranchChangedError: a branch moved since it was read (or, to be created,
                exists); nothing was written.
            RepositoryNotFoundError: a repository of a branch to create is gone.
            ValidationError: an update renames a branch, or names one branch twice.
        """

    # --- tags -------------------------------------------------------------------
    @abstractmethod
    def create_tag(self, repo_id: str, tag: Tag) -> None:
        """Raises TagExistsError."""

    @abstractmethod
    def get_tag(self, repo_id: str, name: str) -> Tag:
        """Raises TagNotFoundError."""

    @abstractmethod
    def list_tags(self, repo_id: str, prefix: str = "", after: str = "",
                  amount: int = 1000) -> list[Tag]: ...

    @abstractmethod
    def delete_tag(self, repo_id: str, name: str) -> None:
        """Raises TagNotFoundError."""

    # --- a dump's refs ---------------------------------------------------------------
    @abstractmethod
    def restore_refs(self, repo_id: str, commits: Sequence[CommitRecord],
                     branches: Sequence[tuple[Branch, bool]], tags: Sequence[Tag], *,
                     present: bool = False) -> None:
        """Write a dump's refs into a bare repository, all or nothing (one transaction).

        Every commit record (also marked present when ``present``: a detached mirror's
        own records), every branch with its hidden flag (the default branch's row,
        which a bare repository has without a head, gets its head), every tag.

        Raises:
            RepositoryNotFoundError: no such repository.
            NonEmptyRepositoryError: it has a commit, a tag or a branch head (meanwhile).
            BranchExistsError / TagExistsError: a name appears twice.
        """

    # --- commits ------------------------------------------------------------------
    @abstractmethod
    def put_commit(self, repo_id: str, commit_id: str, commit: Commit) -> None:
        """Store a commit record. Idempotent: the same id always has the same record.

        Raises RepositoryNotFoundError (a deleted repository gets no new records).
        """

    @abstractmethod
    def get_commit(self, repo_id: str, commit_id: str) -> Commit:
        """Raises CommitNotFoundError."""

    @abstractmethod
    def list_commits(self, repo_id: str, after: str = "",
                     amount: int = 1000) -> list[CommitRecord]:
        """Every commit record of the repository with id > ``after``, sorted by id."""

    @abstractmethod
    def find_commit_ids(self, repo_id: str, prefix: str, limit: int = 2) -> list[str]:
        """Up to ``limit`` commit ids starting with ``prefix`` (to resolve short ids)."""

    # --- staging ----------------------------------------------------------------------
    @abstractmethod
    def put_staged(self, repo_id: str, token: str, record: EntryRecord) -> None:
        """Stage an entry (or a tombstone, ``record.entry is None``), replacing any.

        Raises RepositoryNotFoundError.
        """

    def stage_on_branch(self, repo_id: str, branch_name: str, token: str,
                        record: EntryRecord) -> Branch:
        """Stage a record under ``token``; the branch as it is once the record is there.

        A commit that sealed ``token`` before the branch was read here may have missed
        the record: the branch's live token is then another, and the caller stages
        again under it. Without the branch, the record is taken back. Stores override
        this to do both in one transaction.

        Raises RepositoryNotFoundError, BranchNotFoundError.
        """
        self.put_staged(repo_id, token, record)
        try:
            return self.get_branch(repo_id, branch_name)
        except BranchNotFoundError:
            self.delete_staged(repo_id, token, record.path)
            raise

    @abstractmethod
    def get_staged(self, repo_id: str, token: str, path: str) -> EntryRecord | None:
        """The staged record at ``path`` (maybe a tombstone), or None if nothing staged."""

    @abstractmethod
    def list_staged(self, repo_id: str, token: str, prefix: str = "",
                    after: str = "") -> Iterator[EntryRecord]:
        """Staged records (tombstones included) with path > ``after``, sorted by path."""

    @abstractmethod
    def delete_staged(self, repo_id: str, token: str, path: str) -> None:
        """Remove a staged record (undo a staged change)."""

    @abstractmethod
    def drop_staging(self, repo_id: str, token: str) -> None:
        """Drop every record staged under ``token``."""

    @abstractmethod
    def has_staged(self, repo_id: str, token: str) -> bool: ...
