"""Staging and objects: uncommitted changes of a branch, reads, writes and listings."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from lakefs_core.errors import (
    BranchChangedError,
    LakeFSError,
    ObjectExistsError,
    ObjectNotFoundError,
    PreconditionFailedError,
    ValidationError,
)
from lakefs_core.graveler.core import new_token
from lakefs_core.graveler.model import (
    Branch,
    Difference,
    DiffType,
    Entry,
    EntryRecord,
    Repository,
)
from lakefs_core.graveler.refs import (
    RefExpression,
    is_commit_id,
    parse_ref,
    validate_path,
)
from lakefs_core.graveler.resolution import RefResolver, ResolvedRef, branch_ref
from lakefs_core.protocol.http import etag_listed

_MAX_PATH_CHAR = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class ListingItem:
    """One row of a directory-style listing: an entry, or a common prefix."""

    path: str
    entry: Entry | None  # None for a common prefix


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


class StagingEngine(RefResolver):
    """A branch's staged changes, and the objects of any ref."""

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
            current = self.refstore.stage_on_branch(repo_id, branch_name,
                                                    branch.staging_token, record)
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
        expr = parse_ref(ref)
        if _names_branch_or_tag(expr):
            return self._entry_at(repo, ref, expr, path, self.refstore.get_branch_and_staged(
                repo.id, expr.base, path))
        return self._entry_at(repo, ref, expr, path, None)

    def stat_entry(self, repo_id: str, ref: str, path: str) -> tuple[Repository, Entry]:
        """The repository and the entry at ``path`` in ``ref``; for a branch, the
        repository, the branch and its staged record are read at once.

        Raises:
            RepositoryNotFoundError, ObjectNotFoundError, RefNotFoundError.
        """
        try:
            validate_path(path)
            expr = parse_ref(ref)
        except LakeFSError:  # told after a missing repository, as by the reads one by one
            expr = None
        if expr is None or not _names_branch_or_tag(expr):
            repo = self.refstore.get_repository(repo_id)
            return repo, self.get_entry_in(repo, ref, path)
        repo, found = self.refstore.get_repository_and_staged(repo_id, expr.base, path)
        return repo, self._entry_at(repo, ref, expr, path, found)

    def _entry_at(self, repo: Repository, ref: str, expr: RefExpression, path: str,
                  found: tuple[Branch, EntryRecord | None] | None) -> Entry:
        """The entry at ``path`` in ``ref``; ``found``: for a ref naming a branch or a
        tag, what :meth:`RefStore.get_branch_and_staged` answered for it."""
        repo_id = repo.id
        rec: EntryRecord | None = None
        if not _names_branch_or_tag(expr):
            resolved = self._resolve_expression(repo_id, ref, expr)
            if resolved.branch is not None:
                rec = self._get_staged(repo_id, resolved.branch, path)
        else:  # a branch (the branch row and its staged record read at once) or a tag
            if found is None:
                resolved = self._resolve_non_branch(repo_id, expr.base)
            else:
                resolved = branch_ref(found[0])
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
        if if_match is not None and (current is None or not etag_listed(if_match,
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

    # -------------------------------------------------------- uncommitted changes
    def diff_uncommitted(self, repo_id: str, branch_name: str, *, prefix: str = "",
                         after: str = "", amount: int = 1000) -> tuple[list[Difference], bool]:
        repo = self.refstore.get_repository(repo_id)
        branch = self.refstore.get_branch(repo_id, branch_name)
        return page_of(self._uncommitted(repo, branch, prefix, after), amount)

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

    def reset_branch(self, repo_id: str, branch_name: str) -> None:
        """Drop every uncommitted change on the branch."""
        self._writable_repo(repo_id)

        def attempt() -> None:
            branch = self.refstore.get_branch(repo_id, branch_name)
            if branch.sealed_tokens and self.clock() - branch.sealed_at < self.seal_timeout:
                raise BranchChangedError(f"a commit on branch {branch_name!r} is in progress")
            new = Branch(name=branch.name, commit_id=branch.commit_id,
                         staging_token=new_token())
            self.refstore.update_branch(repo_id, branch, new, writable=True)
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


def _names_branch_or_tag(expr: RefExpression) -> bool:
    """Whether a ref is a plain name (a branch, a tag or a short commit id)."""
    return not (expr.modifiers or expr.committed_only or is_commit_id(expr.base))


def page_of(it: Iterable[Difference], amount: int) -> tuple[list[Difference], bool]:
    if amount <= 0:
        raise ValidationError("amount must be positive")
    out: list[Difference] = []
    for d in it:
        if len(out) == amount:
            return out, True
        out.append(d)
    return out, False
