"""The versioning engine's service layer: repositories, branches, staging and commits.

:class:`Graveler` ties the refstore (rows: repositories, branches, commits, staged
entries) to the range files (:class:`RangeManager`, one per storage namespace) and
implements the Git-like operations on top: commit, log, diff, merge, revert,
cherry-pick, reset and tags.

Concurrency: every branch move is a compare-and-swap on the branch row. A commit
first *seals* the branch's staging token (CAS), applies the sealed changes to the
parent's metarange, writes the commit and then moves the branch (CAS). A second
committer that finds a fresh seal waits and retries on the new head, so concurrent
commits never lose an update; a seal older than ``seal_timeout`` (a committer that
died) is taken over and its changes committed by the next commit.
"""

from __future__ import annotations

import fnmatch
import heapq
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

from lakefs_core.block.base import BlockStore
from lakefs_core.errors import (
    BranchChangedError,
    BranchNotFoundError,
    CannotDeleteDefaultBranchError,
    CommitNotFoundError,
    DirtyBranchError,
    InvalidRefError,
    NoChangesError,
    ObjectExistsError,
    ObjectNotFoundError,
    PreconditionFailedError,
    ProtectedBranchError,
    ReadOnlyRepositoryError,
    RefNotFoundError,
    RepositoryExistsError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.encoding import commit_id as commit_id_of
from lakefs_core.graveler.model import (
    Branch,
    Commit,
    CommitRecord,
    Difference,
    DiffType,
    Entry,
    EntryRecord,
    MirrorMarking,
    Repository,
    Tag,
)
from lakefs_core.graveler.ranges import RangeManager
from lakefs_core.graveler.refs import (
    ModifierType,
    RefExpression,
    could_be_short_commit_id,
    is_commit_id,
    parse_ref,
    validate_branch_name,
    validate_path,
    validate_repository_id,
    validate_tag_name,
)
from lakefs_core.graveler.visibility import MirrorVisibility
from lakefs_core.refstore.base import RefStore

log = logging.getLogger("lakefs_core.graveler")

INITIAL_COMMIT_MESSAGE = "Repository created"
_MAX_PATH_CHAR = "\U0010ffff"


class RefType(StrEnum):
    BRANCH = "branch"
    TAG = "tag"
    COMMIT = "commit"


@dataclass(frozen=True, slots=True)
class ResolvedRef:
    """What a ref expression points at. ``branch`` is set for a plain branch ref."""

    type: RefType
    commit_id: str
    branch: Branch | None = None

    @property
    def reads_staging(self) -> bool:
        return self.branch is not None


@dataclass(frozen=True, slots=True)
class ListingItem:
    """One row of a directory-style listing: an entry, or a common prefix."""

    path: str
    entry: Entry | None  # None for a common prefix


class MergeStrategy(StrEnum):
    DEST_WINS = "dest-wins"
    SOURCE_WINS = "source-wins"


def _new_token() -> str:
    return uuid.uuid4().hex


def merge_sorted_records(streams: Sequence[Iterable[EntryRecord]]) -> Iterator[EntryRecord]:
    """Merge sorted record streams; on equal paths the earliest stream wins."""
    iters = [iter(s) for s in streams]
    heap: list[tuple[str, int, EntryRecord]] = []
    for idx, it in enumerate(iters):
        rec = next(it, None)
        if rec is not None:
            heap.append((rec.path, idx, rec))
    heapq.heapify(heap)
    last: str | None = None
    while heap:
        path, idx, rec = heapq.heappop(heap)
        if path != last:
            yield rec
            last = path
        nxt = next(iters[idx], None)
        if nxt is not None:
            heapq.heappush(heap, (nxt.path, idx, nxt))


class Graveler:
    """The versioning engine over a refstore and one or more blockstores.

    Args:
        refstore: where rows live.
        store_for: returns the blockstore of a storage id ("" = the default store).
        clock: seconds since the epoch (tests may freeze it).
        range_options: keyword arguments for every :class:`RangeManager`.
        seal_timeout: seconds after which a sealed staging token of a dead committer
            is taken over by the next commit.
        commit_retry_seconds: how long a commit or merge retries a lost race.
    """

    def __init__(
        self,
        refstore: RefStore,
        store_for: Callable[[str], BlockStore],
        *,
        clock: Callable[[], float] = time.time,
        range_options: Mapping[str, int] | None = None,
        seal_timeout: float = 300.0,
        commit_retry_seconds: float = 60.0,
    ) -> None:
        self.refstore = refstore
        self.store_for = store_for
        self.clock = clock
        self.range_options = dict(range_options or {})
        self.seal_timeout = seal_timeout
        self.commit_retry_seconds = commit_retry_seconds
        self._ranges: OrderedDict[tuple[str, str], RangeManager] = OrderedDict()
        self._ranges_lock = threading.Lock()
        #: called with (repository, ref name) after a branch or tag moves; must not block
        self.ref_listeners: list[Callable[[str, str], None]] = []
        self._commits: OrderedDict[tuple[str, str], Commit] = OrderedDict()
        #: which commits a repository may serve (mirrors: only those proven present)
        self.visibility = MirrorVisibility(refstore)

    # ------------------------------------------------------------------ plumbing
    def ranges_for(self, repo: Repository) -> RangeManager:
        """The range manager of a repository's storage namespace (cached)."""
        key = (repo.storage_id, repo.storage_namespace)
        with self._ranges_lock:
            rm = self._ranges.get(key)
            if rm is None:
                rm = RangeManager(self.store_for(repo.storage_id), repo.storage_namespace,
                                  **self.range_options)
                self._ranges[key] = rm
                if len(self._ranges) > 256:
                    self._ranges.popitem(last=False)
            else:
                self._ranges.move_to_end(key)
            return rm

    def _retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(BranchChangedError),
            wait=wait_random_exponential(multiplier=0.005, max=0.25),
            stop=stop_after_delay(self.commit_retry_seconds),
            reraise=True,
        )

    def _notify(self, repo_id: str, ref: str) -> None:
        for listener in self.ref_listeners:
            try:
                listener(repo_id, ref)
            except Exception:  # noqa: BLE001 - a listener never fails the operation
                log.exception("ref listener failed")

    def _now(self) -> int:
        return int(self.clock())

    # ------------------------------------------------------------- repositories
    def create_repository(
        self,
        repo_id: str,
        storage_namespace: str,
        default_branch: str = "main",
        *,
        storage_id: str = "",
        read_only: bool = False,
        initial_commit: bool = True,
    ) -> Repository:
        """Create a repository whose first commit is "Repository created" (empty).

        With ``initial_commit=False`` (a mirror) the default branch points at no
        commit until replication promotes one.
        """
        validate_repository_id(repo_id)
        validate_branch_name(default_branch)
        if not storage_namespace or "://" not in storage_namespace:
            raise ValidationError(f"invalid storage namespace {storage_namespace!r}")
        store = self.store_for(storage_id)
        if not storage_namespace.startswith(store.scheme + "://"):
            raise ValidationError(
                f"storage namespace {storage_namespace!r} does not match the "
                f"{store.type} blockstore"
            )
        ns = storage_namespace.rstrip("/")
        for existing in self._all_repositories():
            if existing.id == repo_id:
                raise RepositoryExistsError(f"repository {repo_id!r} already exists")
            if existing.storage_namespace.rstrip("/") == ns:
                raise RepositoryExistsError(
                    f"storage namespace {storage_namespace!r} is already in use by "
                    f"repository {existing.id!r}"
                )
        now = self._now()
        repo = Repository(id=repo_id, storage_namespace=storage_namespace,
                          default_branch=default_branch, creation_date=now,
                          storage_id=storage_id, read_only=read_only)
        commit_id = ""
        if initial_commit:
            # the empty metarange is written first: this also proves the namespace is writable
            mr = self.ranges_for(repo).empty_metarange()
            commit = Commit(parents=(), metarange_id=mr, message=INITIAL_COMMIT_MESSAGE,
                            committer="", creation_date=now, metadata={}, generation=1)
            commit_id = commit_id_of(commit)
            self.refstore.put_commit(repo_id, commit_id, commit)
        self.refstore.create_repository(
            repo, Branch(name=default_branch, commit_id=commit_id, staging_token=_new_token()))
        return repo

    def _all_repositories(self) -> Iterator[Repository]:
        after = ""
        while True:
            page = self.refstore.list_repositories(after=after, amount=1000)
            yield from page
            if len(page) < 1000:
                return
            after = page[-1].id

    def get_repository(self, repo_id: str) -> Repository:
        return self.refstore.get_repository(repo_id)

    def list_repositories(self, prefix: str = "", after: str = "",
                          amount: int = 1000) -> list[Repository]:
        return self.refstore.list_repositories(prefix=prefix, after=after, amount=amount)

    def delete_repository(self, repo_id: str) -> None:
        self.refstore.get_repository(repo_id)
        self.refstore.delete_repository(repo_id)

    def set_read_only(self, repo_id: str, read_only: bool) -> Repository:
        repo = replace(self.refstore.get_repository(repo_id), read_only=read_only)
        self.refstore.update_repository(repo)
        return repo

    def _writable_repo(self, repo_id: str) -> Repository:
        repo = self.refstore.get_repository(repo_id)
        _refuse_read_only(repo)
        return repo

    # --------------------------------------------------------- branch protection
    def get_branch_protection_rules(self, repo_id: str) -> list[str]:
        """Branch name patterns (fnmatch style, e.g. ``main``, ``release-*``)."""
        self.refstore.get_repository(repo_id)
        return list(self.refstore.get_branch_protection_rules(repo_id))

    def set_branch_protection_rules(self, repo_id: str, patterns: Sequence[str]) -> None:
        self._writable_repo(repo_id)
        for p in patterns:
            if not isinstance(p, str) or not p:
                raise ValidationError("branch protection pattern must be a non-empty string")
        self.refstore.set_branch_protection_rules(repo_id, patterns)

    def is_protected(self, repo_id: str, branch: str) -> bool:
        return any(fnmatch.fnmatchcase(branch, p)
                   for p in self.get_branch_protection_rules(repo_id))

    def _check_direct_write(self, repo_id: str, branch: str) -> Repository:
        repo = self._writable_repo(repo_id)
        _refuse_protected(branch, self.refstore.get_branch_protection_rules(repo_id))
        return repo

    def check_direct_write(self, repo_id: str, branch: str) -> tuple[Repository, Branch]:
        """The repository and branch, if the branch exists and may be written directly.

        Raises:
            ReadOnlyRepositoryError, ProtectedBranchError, BranchNotFoundError.
        """
        repo, rules, current = self.refstore.get_write_target(repo_id, branch)
        _refuse_read_only(repo)
        _refuse_protected(branch, rules)
        if current is None:
            raise BranchNotFoundError(f"branch {branch!r} not found")
        return repo, current

    # ----------------------------------------------------------------- branches
    def create_branch(self, repo_id: str, name: str, source_ref: str, *,
                      hidden: bool = False) -> Branch:
        """Create a branch at ``source_ref``; a ``hidden`` one is left out of default listings."""
        self._writable_repo(repo_id)
        validate_branch_name(name)
        resolved = self.resolve_ref(repo_id, source_ref)
        branch = Branch(name=name, commit_id=resolved.commit_id, staging_token=_new_token())
        self.refstore.create_branch(repo_id, branch)
        if hidden:
            self.refstore.set_branch_hidden(repo_id, name, True)
        self._notify(repo_id, name)
        return branch

    def is_branch_hidden(self, repo_id: str, name: str) -> bool:
        return self.refstore.is_branch_hidden(repo_id, name)

    def get_branch(self, repo_id: str, name: str) -> Branch:
        self.refstore.get_repository(repo_id)
        return self.refstore.get_branch(repo_id, name)

    def list_branches(self, repo_id: str, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Branch]:
        self.refstore.get_repository(repo_id)
        return self.refstore.list_branches(repo_id, prefix=prefix, after=after, amount=amount)

    def delete_branch(self, repo_id: str, name: str) -> None:
        repo = self._writable_repo(repo_id)
        if name == repo.default_branch:
            raise CannotDeleteDefaultBranchError(f"cannot delete the default branch {name!r}")
        if self.is_protected(repo_id, name):
            raise ProtectedBranchError(f"cannot delete protected branch {name!r}")
        branch = self.refstore.get_branch(repo_id, name)
        self.refstore.delete_branch(repo_id, name)
        for token in (branch.staging_token, *branch.sealed_tokens):
            self.refstore.drop_staging(repo_id, token)
        self._notify(repo_id, name)

    # --------------------------------------------------------------------- refs
    def resolve_ref(self, repo_id: str, ref: str) -> ResolvedRef:
        """Resolve a ref expression to a commit (and the branch, for a plain branch ref).

        Raises:
            InvalidRefError: malformed expression.
            RefNotFoundError: nothing by that name.
        """
        self.refstore.get_repository(repo_id)
        return self._resolve(repo_id, ref)

    def _resolve(self, repo_id: str, ref: str) -> ResolvedRef:
        """resolve_ref for a repository the caller has already read."""
        return self._resolve_expression(repo_id, ref, parse_ref(ref))

    def _resolve_expression(self, repo_id: str, ref: str, expr: RefExpression) -> ResolvedRef:
        resolved = self._resolve_base(repo_id, expr.base)
        if expr.committed_only:
            if resolved.type is not RefType.BRANCH:
                raise InvalidRefError(f"invalid ref {ref!r}: '@' applies to branches only")
            resolved = ResolvedRef(RefType.COMMIT, resolved.commit_id)
        if not expr.modifiers:
            return resolved
        commit_id = resolved.commit_id
        for kind, n in expr.modifiers:
            commit_id = self._apply_modifier(repo_id, commit_id, kind, n, ref)
        return ResolvedRef(RefType.COMMIT, commit_id)

    def _apply_modifier(self, repo_id: str, commit_id: str, kind: ModifierType, n: int,
                        ref: str) -> str:
        if kind is ModifierType.PARENT:
            if n == 0:
                return commit_id
            parents = self.get_commit(repo_id, commit_id).commit.parents
            if n > len(parents):
                raise RefNotFoundError(f"ref {ref!r}: commit has no parent number {n}")
            return parents[n - 1]
        for _ in range(n):
            parents = self.get_commit(repo_id, commit_id).commit.parents
            if not parents:
                raise RefNotFoundError(f"ref {ref!r}: not enough ancestors")
            commit_id = parents[0]
        return commit_id

    def _resolve_base(self, repo_id: str, base: str) -> ResolvedRef:
        if is_commit_id(base):
            self.refstore.get_commit(repo_id, base)  # raises CommitNotFoundError
            return ResolvedRef(RefType.COMMIT, base)
        try:
            branch = self.refstore.get_branch(repo_id, base)
        except BranchNotFoundError:
            return self._resolve_non_branch(repo_id, base)
        return _branch_ref(branch)

    def _resolve_non_branch(self, repo_id: str, base: str) -> ResolvedRef:
        """Resolve a name that is neither a full commit id nor a branch: a tag, a short id."""
        try:
            return ResolvedRef(RefType.TAG, self.refstore.get_tag(repo_id, base).commit_id)
        except TagNotFoundError:
            pass
        if could_be_short_commit_id(base):
            found = self.refstore.find_commit_ids(repo_id, base, limit=2)
            if len(found) == 1:
                return ResolvedRef(RefType.COMMIT, found[0])
            if len(found) > 1:
                raise InvalidRefError(f"ambiguous commit id prefix {base!r}")
        raise RefNotFoundError(f"ref {base!r} not found")

    # ------------------------------------------------------------------ commits
    def get_commit(self, repo_id: str, commit_id: str) -> CommitRecord:
        # commit records are immutable: the same id always names the same record
        key = (repo_id, commit_id)
        commit = self._commits.get(key)
        if commit is None:
            try:
                commit = self.refstore.get_commit(repo_id, commit_id)
            except CommitNotFoundError:
                raise CommitNotFoundError(f"commit {commit_id!r} not found") from None
            with self._ranges_lock:
                self._commits[key] = commit
                if len(self._commits) > 50_000:
                    self._commits.popitem(last=False)
        return CommitRecord(commit_id, commit)

    # ------------------------------------------------------------------ mirrors
    def mirror_marking(self, repo_id: str) -> MirrorMarking | None:
        """What makes the repository a mirror; None for other repositories."""
        return self.refstore.get_mirror_marking(repo_id)

    def _put_local_commit(self, repo_id: str, commit_id: str, commit: Commit) -> None:
        """Store a commit made here; in a detached mirror it is present by construction."""
        self.refstore.put_commit(repo_id, commit_id, commit)
        if self.refstore.get_mirror_marking(repo_id) is not None:
            self.refstore.mark_commit_present(repo_id, commit_id)

    def _readable_commit(self, repo: Repository, commit_id: str) -> Commit:
        """The commit, if its data may be served from this repository.

        Raises:
            CommitNotFoundError: no such commit, or a mirror's commit not proven present.
        """
        commit = self.get_commit(repo.id, commit_id).commit
        self.visibility.check_servable(repo, commit_id)
        return commit

    def _commit_of_ref(self, repo_id: str, ref: str) -> CommitRecord:
        return self.get_commit(repo_id, self.resolve_ref(repo_id, ref).commit_id)

    # ----------------------------------------------------------------- staging
    def _staged_streams(self, repo_id: str, branch: Branch, prefix: str,
                        after: str) -> list[Iterator[EntryRecord]]:
        return [self.refstore.list_staged(repo_id, t, prefix=prefix, after=after)
                for t in (branch.staging_token, *branch.sealed_tokens)]

    def _get_staged(self, repo_id: str, branch: Branch, path: str) -> EntryRecord | None:
        for token in (branch.staging_token, *branch.sealed_tokens):
            rec = self.refstore.get_staged(repo_id, token, path)
            if rec is not None:
                return rec
        return None

    def has_uncommitted(self, repo_id: str, branch: Branch) -> bool:
        return any(self.refstore.has_staged(repo_id, t)
                   for t in (branch.staging_token, *branch.sealed_tokens))

    def _stage(self, repo_id: str, branch_name: str, record: EntryRecord,
               branch: Branch | None = None) -> None:
        """Stage a record on a branch's live token, following a concurrent seal.

        A commit may seal the token between our read of the branch and our write;
        writing again to the new live token keeps the change from being dropped.
        """
        if branch is None:
            branch = self.refstore.get_branch(repo_id, branch_name)
        for _ in range(100):
            self.refstore.put_staged(repo_id, branch.staging_token, record)
            current = self.refstore.get_branch(repo_id, branch_name)
            if current.staging_token == branch.staging_token:
                return
            branch = current
        raise BranchChangedError(f"branch {branch_name!r} keeps changing; retry the write")

    # ----------------------------------------------------------------- objects
    def get_entry(self, repo_id: str, ref: str, path: str) -> Entry:
        """The entry at ``path`` in ``ref`` (staged changes included for a branch).

        Raises:
            ObjectNotFoundError: no object at that path.
        """
        return self.get_entry_in(self.refstore.get_repository(repo_id), ref, path)

    def get_entry_in(self, repo: Repository, ref: str, path: str) -> Entry:
        """get_entry for a repository the caller has already read."""
        validate_path(path)
        repo_id = repo.id
        expr = parse_ref(ref)
        rec: EntryRecord | None = None
        if expr.modifiers or expr.committed_only or is_commit_id(expr.base):
            resolved = self._resolve_expression(repo_id, ref, expr)
            if resolved.branch is not None:
                rec = self._get_staged(repo_id, resolved.branch, path)
        else:  # a branch (the branch row and its staged record read at once) or a tag
            found = self.refstore.get_branch_and_staged(repo_id, expr.base, path)
            if found is None:
                resolved = self._resolve_non_branch(repo_id, expr.base)
            else:
                resolved = _branch_ref(found[0])
                rec = found[1]
        if rec is not None:
            if rec.entry is None:
                raise ObjectNotFoundError(f"object {path!r} not found")
            return rec.entry
        commit = self._readable_commit(repo, resolved.commit_id)
        entry = self.ranges_for(repo).get_entry(commit.metarange_id, path)
        if entry is None:
            raise ObjectNotFoundError(f"object {path!r} not found")
        return entry

    def set_entry(self, repo_id: str, branch: str, path: str, entry: Entry, *,
                  if_absent: bool = False, if_match: str | None = None) -> None:
        """Stage ``entry`` at ``path`` on ``branch``.

        Raises:
            ObjectExistsError: ``if_absent`` and an object is already there.
            PreconditionFailedError: ``if_match`` and the object there is not that one.
        """
        validate_path(path)
        repo, current = self.check_direct_write(repo_id, branch)
        self.stage_checked(repo, current, path, entry, if_absent=if_absent, if_match=if_match)

    def stage_checked(self, repo: Repository, branch: Branch, path: str, entry: Entry, *,
                      if_absent: bool = False, if_match: str | None = None) -> None:
        """Stage an entry on a branch that :meth:`check_direct_write` just returned."""
        validate_path(path)
        self.check_write_conditions(repo, branch.name, path, if_absent=if_absent,
                                    if_match=if_match)
        self._stage(repo.id, branch.name, EntryRecord(path, entry), branch)

    def check_write_conditions(self, repo: Repository, branch: str, path: str, *,
                               if_absent: bool = False, if_match: str | None = None) -> None:
        """Check a conditional write's preconditions against the branch as it is now.

        ``if_absent``: no object at ``path`` (``If-None-Match: *``). ``if_match``: an
        ``If-Match`` value, ETags (quoted or not, comma-separated) or ``*``, one of
        which the object at ``path`` must have. The check and the write that follows
        are two steps: two writers conditioned on the same state may both pass.

        Raises:
            ObjectExistsError, PreconditionFailedError.
        """
        if not if_absent and if_match is None:
            return
        try:
            current: Entry | None = self.get_entry_in(repo, branch, path)
        except ObjectNotFoundError:
            current = None
        if if_absent and current is not None:
            raise ObjectExistsError(f"object {path!r} already exists")
        if if_match is not None and (current is None or not _etag_listed(if_match,
                                                                         current.etag)):
            raise PreconditionFailedError(
                f"If-Match {if_match!r} does not match the object at {path!r}")

    def delete_entry(self, repo_id: str, branch: str, path: str) -> None:
        """Stage a delete. Raises ObjectNotFoundError when nothing is at ``path``."""
        self._check_direct_write(repo_id, branch)
        self.get_entry(repo_id, branch, path)
        self._stage(repo_id, branch, EntryRecord(path, None))

    def iterate_entries(self, repo_id: str, ref: str, prefix: str = "",
                        after: str = "") -> Iterator[EntryRecord]:
        """Entries (no tombstones) under ``prefix`` after ``after``, sorted by path."""
        repo = self.refstore.get_repository(repo_id)
        resolved = self.resolve_ref(repo_id, ref)
        return self._iterate(repo, resolved, prefix, after)

    def _iterate(self, repo: Repository, resolved: ResolvedRef, prefix: str,
                 after: str) -> Iterator[EntryRecord]:
        commit = self._readable_commit(repo, resolved.commit_id)
        committed = self.ranges_for(repo).iterate(commit.metarange_id, prefix=prefix, after=after)
        if resolved.branch is None:
            yield from committed
            return
        streams = [*self._staged_streams(repo.id, resolved.branch, prefix, after), committed]
        for rec in merge_sorted_records(streams):
            if rec.entry is not None:
                yield rec

    def list_entries(self, repo_id: str, ref: str, prefix: str = "", after: str = "",
                     amount: int = 1000, delimiter: str = "") -> tuple[list[ListingItem], bool]:
        """A page of a listing, directory-style when ``delimiter`` is given.

        Returns:
            (items, has_more)
        """
        if amount <= 0:
            raise ValidationError("amount must be positive")
        repo = self.refstore.get_repository(repo_id)
        resolved = self.resolve_ref(repo_id, ref)
        items: list[ListingItem] = []
        start = after
        while True:
            restart: str | None = None
            for rec in self._iterate(repo, resolved, prefix, start):
                if len(items) == amount:
                    return items, True
                if delimiter:
                    rest = rec.path[len(prefix):]
                    cut = rest.find(delimiter)
                    if cut >= 0:
                        common = prefix + rest[: cut + len(delimiter)]
                        if common > after:
                            items.append(ListingItem(common, None))
                        restart = common + _MAX_PATH_CHAR
                        break
                items.append(ListingItem(rec.path, rec.entry))
            if restart is None:
                return items, False
            start = restart

    # ------------------------------------------------------------------ commit
    def commit(self, repo_id: str, branch_name: str, message: str, committer: str, *,
               metadata: Mapping[str, str] | None = None, allow_empty: bool = False,
               creation_date: int | None = None) -> CommitRecord:
        """Commit the branch's staged changes.

        Raises:
            NoChangesError: nothing staged and not ``allow_empty``.
            ProtectedBranchError / ReadOnlyRepositoryError: writes refused.
        """
        repo = self._check_direct_write(repo_id, branch_name)
        return self._retrying()(self._commit_once, repo, branch_name, message, committer,
                                dict(metadata or {}), allow_empty, creation_date)

    def _commit_once(self, repo: Repository, branch_name: str, message: str, committer: str,
                     metadata: dict[str, str], allow_empty: bool,
                     creation_date: int | None) -> CommitRecord:
        branch = self.refstore.get_branch(repo.id, branch_name)
        if branch.sealed_tokens and self.clock() - branch.sealed_at < self.seal_timeout:
            raise BranchChangedError(f"a commit on branch {branch_name!r} is in progress")
        sealed = Branch(name=branch.name, commit_id=branch.commit_id, staging_token=_new_token(),
                        sealed_tokens=(branch.staging_token, *branch.sealed_tokens),
                        sealed_at=self.clock())
        self.refstore.update_branch(repo.id, branch, sealed)
        unsealed = replace(sealed, sealed_tokens=(), sealed_at=0.0)
        try:
            parent = self.get_commit(repo.id, branch.commit_id).commit
            changes = merge_sorted_records(
                [self.refstore.list_staged(repo.id, t) for t in sealed.sealed_tokens])
            result = self.ranges_for(repo).apply(parent.metarange_id, changes)
            if result.metarange_id == parent.metarange_id and not allow_empty:
                raise NoChangesError()
            commit = Commit(parents=(branch.commit_id,), metarange_id=result.metarange_id,
                            message=message, committer=committer,
                            creation_date=creation_date if creation_date is not None
                            else self._now(),
                            metadata=metadata, generation=parent.generation + 1)
            cid = commit_id_of(commit)
            self._put_local_commit(repo.id, cid, commit)
        except BaseException:
            # give the staged changes back to the branch: nothing was committed
            restored = replace(unsealed, staging_token=sealed.staging_token)
            try:
                self._unseal(repo.id, sealed, restored)
            except BranchChangedError:
                pass  # taken over by another commit, which will include them
            raise
        self.refstore.update_branch(repo.id, sealed, replace(unsealed, commit_id=cid))
        for token in sealed.sealed_tokens:
            self.refstore.drop_staging(repo.id, token)
        self._notify(repo.id, branch_name)
        return CommitRecord(cid, commit)

    def commit_metarange(self, repo_id: str, branch_name: str, metarange_id: str,
                         message: str, committer: str, *,
                         metadata: Mapping[str, str] | None = None,
                         allow_empty: bool = False,
                         creation_date: int | None = None) -> CommitRecord:
        """Commit an existing metarange (written by an import or a job) on the branch.

        Raises:
            ValidationError: ``metarange_id`` is not a metarange id.
            RangeNotFoundError: no such metarange in the repository's storage namespace.
            DirtyBranchError: the branch has uncommitted changes.
            NoChangesError: the metarange is the branch head's and not ``allow_empty``.
        """
        if not is_commit_id(metarange_id):
            raise ValidationError(f"invalid metarange id {metarange_id!r}")
        repo = self._check_direct_write(repo_id, branch_name)
        self.ranges_for(repo).get_metarange(metarange_id)  # RangeNotFoundError if absent

        def attempt() -> CommitRecord:
            branch = self.refstore.get_branch(repo_id, branch_name)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            head = self.get_commit(repo_id, branch.commit_id).commit
            if metarange_id == head.metarange_id and not allow_empty:
                raise NoChangesError()
            commit = Commit(parents=(branch.commit_id,), metarange_id=metarange_id,
                            message=message, committer=committer,
                            creation_date=creation_date if creation_date is not None
                            else self._now(),
                            metadata=dict(metadata or {}), generation=head.generation + 1)
            return self._land(repo_id, branch, commit)

        return self._retrying()(attempt)

    def _unseal(self, repo_id: str, sealed: Branch, restored: Branch) -> None:
        """Move sealed records back into the live token after a failed commit."""
        for token in reversed(sealed.sealed_tokens):
            for rec in self.refstore.list_staged(repo_id, token):
                if self.refstore.get_staged(repo_id, restored.staging_token, rec.path) is None:
                    self.refstore.put_staged(repo_id, restored.staging_token, rec)
        self.refstore.update_branch(repo_id, sealed, restored)
        for token in sealed.sealed_tokens:
            self.refstore.drop_staging(repo_id, token)

    # --------------------------------------------------------------------- log
    def log(self, repo_id: str, ref: str, *, amount: int = 100, after: str = "",
            first_parent: bool = False, limit: bool = False,
            objects: Sequence[str] = (), prefixes: Sequence[str] = ()) -> tuple[
                list[CommitRecord], bool]:
        """Commits reachable from ``ref``, newest first (by generation, then date).

        Args:
            after: a commit id; the page starts after it.
            objects, prefixes: only commits that changed these paths/prefixes.
            limit: stop after ``amount`` commits, reporting no further page.

        Returns:
            (commits, has_more)
        """
        if amount <= 0:
            raise ValidationError("amount must be positive")
        repo = self.refstore.get_repository(repo_id)
        start = self.resolve_ref(repo_id, ref).commit_id
        out: list[CommitRecord] = []
        skipping = bool(after)
        for rec in self._walk(repo_id, start, first_parent):
            if skipping:
                if rec.id == after:
                    skipping = False
                continue
            if (objects or prefixes) and not self._touches(repo, rec, objects, prefixes):
                continue
            if len(out) == amount:
                return out, not limit
            out.append(rec)
        return out, False

    def _walk(self, repo_id: str, start: str, first_parent: bool) -> Iterator[CommitRecord]:
        first = self.get_commit(repo_id, start)
        heap: list[tuple[int, int, str, CommitRecord]] = [
            (-first.commit.generation, -first.commit.creation_date, first.id, first)]
        seen = {start}
        while heap:
            _, _, _, rec = heapq.heappop(heap)
            yield rec
            parents = rec.commit.parents[:1] if first_parent else rec.commit.parents
            for pid in parents:
                if pid in seen:
                    continue
                seen.add(pid)
                p = self.get_commit(repo_id, pid)
                heapq.heappush(heap, (-p.commit.generation, -p.commit.creation_date, pid, p))

    def _touches(self, repo: Repository, rec: CommitRecord, objects: Sequence[str],
                 prefixes: Sequence[str]) -> bool:
        rm = self.ranges_for(repo)
        parent_mr = (self.get_commit(repo.id, rec.commit.parents[0]).commit.metarange_id
                     if rec.commit.parents else rm.empty_metarange())
        for obj in objects:
            if rm.get_entry(parent_mr, obj) != rm.get_entry(rec.commit.metarange_id, obj):
                return True
        for p in prefixes:
            if next(iter(rm.diff(parent_mr, rec.commit.metarange_id, prefix=p)), None):
                return True
        return False

    def find_merge_base(self, repo_id: str, left: str, right: str) -> str | None:
        """The best common ancestor of two commits (highest generation), or None."""
        if left == right:
            return left
        flags: dict[str, int] = {}
        heap: list[tuple[int, str, int]] = []
        for cid, flag in ((left, 1), (right, 2)):
            c = self.get_commit(repo_id, cid).commit
            flags[cid] = flags.get(cid, 0) | flag
            heapq.heappush(heap, (-c.generation, cid, flag))
        while heap:
            _, cid, _ = heapq.heappop(heap)
            f = flags[cid]
            if f == 3:
                return cid
            for pid in self.get_commit(repo_id, cid).commit.parents:
                before = flags.get(pid, 0)
                if before | f != before:
                    flags[pid] = before | f
                    heapq.heappush(heap, (-self.get_commit(repo_id, pid).commit.generation,
                                          pid, f))
        return None

    def is_ancestor(self, repo_id: str, ancestor: str, descendant: str) -> bool:
        return self.find_merge_base(repo_id, ancestor, descendant) == ancestor

    # -------------------------------------------------------------------- diff
    def diff(self, repo_id: str, left_ref: str, right_ref: str, *, prefix: str = "",
             after: str = "", amount: int = 1000, three_dot: bool = False) -> tuple[
                 list[Difference], bool]:
        """Committed differences between two refs (two-dot, or three-dot from their base)."""
        repo = self.refstore.get_repository(repo_id)
        left = self._commit_of_ref(repo_id, left_ref)
        right = self._commit_of_ref(repo_id, right_ref)
        self._readable_commit(repo, left.id)
        self._readable_commit(repo, right.id)
        left_mr = left.commit.metarange_id
        if three_dot:
            base = self.find_merge_base(repo_id, left.id, right.id)
            left_mr = (self.get_commit(repo_id, base).commit.metarange_id if base
                       else self.ranges_for(repo).empty_metarange())
        it = self.ranges_for(repo).diff(left_mr, right.commit.metarange_id, prefix=prefix,
                                        after=after)
        return _page(it, amount)

    def diff_uncommitted(self, repo_id: str, branch_name: str, *, prefix: str = "",
                         after: str = "", amount: int = 1000) -> tuple[list[Difference], bool]:
        repo = self.refstore.get_repository(repo_id)
        branch = self.refstore.get_branch(repo_id, branch_name)
        return _page(self._uncommitted(repo, branch, prefix, after), amount)

    def _uncommitted(self, repo: Repository, branch: Branch, prefix: str,
                     after: str) -> Iterator[Difference]:
        rm = self.ranges_for(repo)
        mr = self.get_commit(repo.id, branch.commit_id).commit.metarange_id
        staged = merge_sorted_records(self._staged_streams(repo.id, branch, prefix, after))
        for rec in staged:
            old = rm.get_entry(mr, rec.path)
            if rec.entry is None:
                if old is not None:
                    yield Difference(rec.path, DiffType.REMOVED, old, None)
            elif old is None:
                yield Difference(rec.path, DiffType.ADDED, None, rec.entry)
            elif old != rec.entry:
                yield Difference(rec.path, DiffType.CHANGED, old, rec.entry)

    # ------------------------------------------------------------------- merge
    def merge(self, repo_id: str, source_ref: str, dest_branch: str, committer: str, *,
              message: str = "", metadata: Mapping[str, str] | None = None,
              strategy: str | None = None, squash: bool = False,
              allow_empty: bool = False) -> CommitRecord:
        """Three-way merge of ``source_ref`` into ``dest_branch`` with a merge commit.

        Args:
            squash: the commit has the destination as its only parent (the source's
                history is not part of the destination's).
            allow_empty: commit even when the merge leaves the destination's content
                as it was.

        Protected branches accept merges. Raises NoChangesError, MergeConflictError,
        DirtyBranchError (destination has uncommitted changes).
        """
        self._writable_repo(repo_id)
        if strategy not in (None, "", *[s.value for s in MergeStrategy]):
            raise ValidationError(f"unknown merge strategy {strategy!r}")
        source = self.resolve_ref(repo_id, source_ref).commit_id

        def attempt() -> CommitRecord:
            repo = self._writable_repo(repo_id)
            branch = self.refstore.get_branch(repo_id, dest_branch)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            dest = branch.commit_id
            if self.is_ancestor(repo_id, source, dest):
                raise NoChangesError()
            base = self.find_merge_base(repo_id, source, dest)
            rm = self.ranges_for(repo)
            base_mr = (self.get_commit(repo_id, base).commit.metarange_id if base
                       else rm.empty_metarange())
            src_c = self.get_commit(repo_id, source).commit
            dst_c = self.get_commit(repo_id, dest).commit
            result = rm.merge(base_mr, src_c.metarange_id, dst_c.metarange_id,
                              strategy or None)
            if result.metarange_id == dst_c.metarange_id and not allow_empty:
                raise NoChangesError()
            commit = Commit(
                parents=(dest,) if squash else (dest, source),
                metarange_id=result.metarange_id,
                message=message or f"Merge '{source_ref}' into '{dest_branch}'",
                committer=committer, creation_date=self._now(), metadata=dict(metadata or {}),
                generation=(dst_c.generation if squash
                            else max(src_c.generation, dst_c.generation)) + 1)
            return self._land(repo_id, branch, commit)

        return self._retrying()(attempt)

    def _land(self, repo_id: str, branch: Branch, commit: Commit) -> CommitRecord:
        """Write a commit and move the branch to it (CAS on the branch as read)."""
        cid = commit_id_of(commit)
        self._put_local_commit(repo_id, cid, commit)
        self.refstore.update_branch(repo_id, branch, replace(branch, commit_id=cid))
        self._notify(repo_id, branch.name)
        return CommitRecord(cid, commit)

    def _pick(self, repo_id: str, branch_name: str, base_mr_of: Callable[[Commit], str],
              target_mr_of: Callable[[Commit], str], ref: str, message: Callable[[str], str],
              committer: str, metadata_of: Callable[[Commit], Mapping[str, str]]) -> CommitRecord:
        self._check_direct_write(repo_id, branch_name)
        picked = self._commit_of_ref(repo_id, ref)

        def attempt() -> CommitRecord:
            repo = self._writable_repo(repo_id)
            branch = self.refstore.get_branch(repo_id, branch_name)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            head = self.get_commit(repo_id, branch.commit_id).commit
            result = self.ranges_for(repo).merge(base_mr_of(picked.commit),
                                                 target_mr_of(picked.commit), head.metarange_id)
            if result.metarange_id == head.metarange_id:
                raise NoChangesError()
            commit = Commit(parents=(branch.commit_id,), metarange_id=result.metarange_id,
                            message=message(picked.id), committer=committer,
                            creation_date=self._now(), metadata=dict(metadata_of(picked.commit)),
                            generation=head.generation + 1)
            return self._land(repo_id, branch, commit)

        return self._retrying()(attempt)

    def _parent_mr(self, repo_id: str, commit: Commit, parent_number: int) -> str:
        if not commit.parents:
            raise ValidationError("cannot use a commit with no parents")
        if len(commit.parents) > 1 and parent_number < 1:
            raise ValidationError("parent_number is required for a merge commit")
        n = max(parent_number, 1)
        if n > len(commit.parents):
            raise ValidationError(f"commit has no parent number {n}")
        return self.get_commit(repo_id, commit.parents[n - 1]).commit.metarange_id

    def revert(self, repo_id: str, branch_name: str, ref: str, committer: str, *,
               parent_number: int = 0, message: str | None = None,
               metadata: Mapping[str, str] | None = None) -> CommitRecord:
        """A new commit on the branch undoing the changes ``ref`` made to its parent.

        ``message`` and ``metadata`` replace the commit's defaults (``Revert <id>``, none).
        """
        return self._pick(
            repo_id, branch_name,
            base_mr_of=lambda c: c.metarange_id,
            target_mr_of=lambda c: self._parent_mr(repo_id, c, parent_number),
            ref=ref, message=lambda cid: message or f"Revert {cid}", committer=committer,
            metadata_of=lambda c: metadata if metadata is not None else {})

    def cherry_pick(self, repo_id: str, branch_name: str, ref: str, committer: str, *,
                    parent_number: int = 0, message: str | None = None,
                    metadata: Mapping[str, str] | None = None) -> CommitRecord:
        """A new commit on the branch applying the changes ``ref`` made to its parent.

        ``message`` and ``metadata`` replace the picked commit's.
        """
        return self._pick(
            repo_id, branch_name,
            base_mr_of=lambda c: self._parent_mr(repo_id, c, parent_number),
            target_mr_of=lambda c: c.metarange_id,
            ref=ref,
            message=lambda cid: message or self.get_commit(repo_id, cid).commit.message,
            committer=committer,
            metadata_of=lambda c: metadata if metadata is not None else c.metadata)

    # ------------------------------------------------------------------- reset
    def reset_branch(self, repo_id: str, branch_name: str) -> None:
        """Drop every uncommitted change on the branch."""
        self._writable_repo(repo_id)

        def attempt() -> None:
            branch = self.refstore.get_branch(repo_id, branch_name)
            if branch.sealed_tokens and self.clock() - branch.sealed_at < self.seal_timeout:
                raise BranchChangedError(f"a commit on branch {branch_name!r} is in progress")
            new = Branch(name=branch.name, commit_id=branch.commit_id,
                         staging_token=_new_token())
            self.refstore.update_branch(repo_id, branch, new)
            for token in (branch.staging_token, *branch.sealed_tokens):
                self.refstore.drop_staging(repo_id, token)

        self._retrying()(attempt)

    def reset_object(self, repo_id: str, branch_name: str, path: str) -> None:
        """Drop the uncommitted change of one path."""
        self._writable_repo(repo_id)
        branch = self.refstore.get_branch(repo_id, branch_name)
        self.refstore.delete_staged(repo_id, branch.staging_token, validate_path(path))

    def reset_prefix(self, repo_id: str, branch_name: str, prefix: str) -> None:
        """Drop the uncommitted changes under a prefix."""
        self._writable_repo(repo_id)
        branch = self.refstore.get_branch(repo_id, branch_name)
        paths = [r.path for r in self.refstore.list_staged(repo_id, branch.staging_token,
                                                            prefix=prefix)]
        for p in paths:
            self.refstore.delete_staged(repo_id, branch.staging_token, p)

    def hard_reset(self, repo_id: str, branch_name: str, ref: str) -> Branch:
        """Point the branch at ``ref``'s commit, dropping uncommitted changes."""
        self._check_direct_write(repo_id, branch_name)
        target = self.resolve_ref(repo_id, ref).commit_id

        def attempt() -> Branch:
            branch = self.refstore.get_branch(repo_id, branch_name)
            new = Branch(name=branch.name, commit_id=target, staging_token=_new_token())
            self.refstore.update_branch(repo_id, branch, new)
            for token in (branch.staging_token, *branch.sealed_tokens):
                self.refstore.drop_staging(repo_id, token)
            return new

        moved = self._retrying()(attempt)
        self._notify(repo_id, branch_name)
        return moved

    # -------------------------------------------------------------------- tags
    def create_tag(self, repo_id: str, name: str, ref: str) -> Tag:
        self._writable_repo(repo_id)
        validate_tag_name(name)
        tag = Tag(name=name, commit_id=self.resolve_ref(repo_id, ref).commit_id)
        self.refstore.create_tag(repo_id, tag)
        self._notify(repo_id, name)
        return tag

    def get_tag(self, repo_id: str, name: str) -> Tag:
        self.refstore.get_repository(repo_id)
        return self.refstore.get_tag(repo_id, name)

    def list_tags(self, repo_id: str, prefix: str = "", after: str = "",
                  amount: int = 1000) -> list[Tag]:
        self.refstore.get_repository(repo_id)
        return self.refstore.list_tags(repo_id, prefix=prefix, after=after, amount=amount)

    def delete_tag(self, repo_id: str, name: str) -> None:
        self._writable_repo(repo_id)
        self.refstore.delete_tag(repo_id, name)
        self._notify(repo_id, name)


def _refuse_read_only(repo: Repository) -> None:
    if repo.read_only:
        raise ReadOnlyRepositoryError(f"repository {repo.id!r} is read-only")


def _refuse_protected(branch: str, rules: Sequence[str]) -> None:
    """Raise ProtectedBranchError if a protection pattern of ``rules`` matches ``branch``."""
    if any(fnmatch.fnmatchcase(branch, p) for p in rules):
        raise ProtectedBranchError(f"cannot write to protected branch {branch!r}")


def _branch_ref(branch: Branch) -> ResolvedRef:
    """A plain branch ref. Raises RefNotFoundError for a branch with no commit yet."""
    if not branch.commit_id:
        raise RefNotFoundError(f"branch {branch.name!r} has no commit yet")
    return ResolvedRef(RefType.BRANCH, branch.commit_id, branch)


def _page(it: Iterable[Difference], amount: int) -> tuple[list[Difference], bool]:
    if amount <= 0:
        raise ValidationError("amount must be positive")
    out: list[Difference] = []
    for d in it:
        if len(out) == amount:
            return out, True
        out.append(d)
    return out, False


__all__ = [
    "Graveler",
    "ListingItem",
    "MergeStrategy",
    "RefType",
    "ResolvedRef",
    "merge_sorted_records",
]


def _etag_listed(condition: str, etag: str) -> bool:
    """Whether an ``If-Match`` value (``*`` or ETags, quoted or weak) lists ``etag``."""
    candidates = [c.strip().removeprefix("W/").strip('"') for c in condition.split(",")]
    return "*" in candidates or etag.strip('"') in candidates
