"""Commit and merge: sealing staged changes into commits, merges, reverts, cherry-picks.

Concurrency: every branch move is a compare-and-swap on the branch row. A commit
first *seals* the branch's staging token (CAS), applies the sealed changes to the
parent's metarange, writes the commit and then moves the branch (CAS). A second
committer that finds a fresh seal waits and retries on the new head, so concurrent
commits never lose an update; a seal older than ``seal_timeout`` (a committer that
died) is taken over and its changes committed by the next commit.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum

from lakefs_core.errors import (
    BranchChangedError,
    CommitExistsError,
    CommitNotFoundError,
    DirtyBranchError,
    NoChangesError,
    ValidationError,
)
from lakefs_core.graveler.core import new_token
from lakefs_core.graveler.encoding import commit_id as commit_id_of
from lakefs_core.graveler.hooks import EventType, HookRecord
from lakefs_core.graveler.model import (
    Branch,
    Commit,
    CommitRecord,
    Difference,
    EntryRecord,
    Repository,
)
from lakefs_core.graveler.refs import (
    is_commit_id,
)
from lakefs_core.graveler.staging import StagingEngine, merge_sorted_records, page_of

#: metadata keys of a cherry-picked commit, as lakeFS writes them
CHERRY_PICK_ORIGIN = "cherry-pick-origin"
CHERRY_PICK_COMMITTER = "cherry-pick-committer"
#: the metadata key of a merge commit that names its strategy, as lakeFS writes it
MERGE_STRATEGY_KEY = ".lakefs.merge.strategy"
#: its value when no strategy was chosen
DEFAULT_MERGE_STRATEGY = "default"


class MergeStrategy(StrEnum):
    DEST_WINS = "dest-wins"
    SOURCE_WINS = "source-wins"


class CommitEngine(StagingEngine):
    """Commits, diffs between commits, merges, reverts, cherry-picks and hard resets."""

    def commit(self, repo_id: str, branch_name: str, message: str, committer: str, *,
               metadata: Mapping[str, str] | None = None, allow_empty: bool = False,
               creation_date: int | None = None) -> CommitRecord:
        """Commit the branch's staged changes.

        Raises:
            NoChangesError: nothing staged and not ``allow_empty``.
            ProtectedBranchError / ReadOnlyRepositoryError: writes refused.
        """
        repo = self._check_direct_write(repo_id, branch_name, commit=True)
        meta = dict(metadata or {})
        # prepare-commit runs first, while its hooks may still write to the branch
        prepare = HookRecord(
            EventType.PREPARE_COMMIT, repo, source_ref=branch_name, branch_id=branch_name,
            commit_message=message, committer=committer, commit_metadata=meta,
            acting_user=committer)
        self.hooks.pre(prepare)
        run_id = self.hooks.pre(replace(prepare, event_type=EventType.PRE_COMMIT))
        rec = self._retrying()(self._commit_once, repo, branch_name, message, committer,
                               meta, allow_empty, creation_date)
        self.hooks.post(HookRecord(
            EventType.POST_COMMIT, repo, source_ref=rec.id, branch_id=branch_name,
            commit_id=rec.id, commit_message=message, committer=committer,
            commit_metadata=meta, acting_user=committer), run_id)
        return rec

    def _commit_once(self, repo: Repository, branch_name: str, message: str, committer: str,
                     metadata: dict[str, str], allow_empty: bool,
                     creation_date: int | None) -> CommitRecord:
        branch = self.refstore.get_branch(repo.id, branch_name)
        if branch.sealed_tokens and self.clock() - branch.sealed_at < self.seal_timeout:
            raise BranchChangedError(f"a commit on branch {branch_name!r} is in progress")
        sealed = Branch(name=branch.name, commit_id=branch.commit_id, staging_token=new_token(),
                        sealed_tokens=(branch.staging_token, *branch.sealed_tokens),
                        sealed_at=self.clock())
        self.refstore.update_branch(repo.id, branch, sealed, writable=True)
        unsealed = replace(sealed, sealed_tokens=(), sealed_at=0.0)
        try:
            parent = self.get_commit(repo.id, branch.commit_id).commit
            changes = merge_sorted_records(
                [self.refstore.list_staged(repo.id, t) for t in sealed.sealed_tokens])
            result = self.ranges_for(repo).apply(parent.metarange_id, changes)
            if result.metarange_id == parent.metarange_id and not allow_empty:
                raise NoChangesError("commit: no changes")
            commit = Commit(parents=(branch.commit_id,), metarange_id=result.metarange_id,
                            message=message, committer=committer,
                            creation_date=creation_date if creation_date is not None
                            else self._now(),
                            metadata=metadata, generation=parent.generation + 1)
            cid = commit_id_of(commit)
            self._put_local_commit(repo.id, cid, commit)
            # atomically with the repository being writable still: a commit that passed
            # the first check before a switchover froze the repository lands before the
            # freeze or not at all
            self.refstore.update_branch(repo.id, sealed, replace(unsealed, commit_id=cid),
                                        writable=True)
        except BaseException:
            # give the staged changes back to the branch: nothing was committed
            restored = replace(unsealed, staging_token=sealed.staging_token)
            try:
                self._unseal(repo.id, sealed, restored)
            except BranchChangedError:
                pass  # taken over by another commit, which will include them
            raise
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
        repo = self._check_direct_write(repo_id, branch_name, commit=True)
        self.ranges_for(repo).get_metarange(metarange_id)  # RangeNotFoundError if absent

        def attempt() -> CommitRecord:
            branch = self.refstore.get_branch(repo_id, branch_name)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            head = self.get_commit(repo_id, branch.commit_id).commit
            if metarange_id == head.metarange_id and not allow_empty:
                raise NoChangesError("commit: no changes")
            commit = Commit(parents=(branch.commit_id,), metarange_id=metarange_id,
                            message=message, committer=committer,
                            creation_date=creation_date if creation_date is not None
                            else self._now(),
                            metadata=dict(metadata or {}), generation=head.generation + 1)
            return self._land(repo_id, branch, commit)

        return self._retrying()(attempt)

    def commit_import(self, repo_id: str, branch_name: str, source_metarange: str,
                      replaced_prefixes: Sequence[str], message: str, committer: str, *,
                      metadata: Mapping[str, str] | None = None,
                      before_commit: Callable[[], None] | None = None) -> CommitRecord:
        """Commit imported entries onto the branch: one commit over its head.

        The branch keeps its content, except that every path under
        ``replaced_prefixes`` is replaced by the import (paths there that the import
        lacks are removed) and the import's paths are set. Only the ranges the import
        touches are rewritten.

        Args:
            source_metarange: the imported entries (a metarange of this repository).
            replaced_prefixes: the destinations of imported prefixes.
            before_commit: called once the commit is ready, just before the branch
                moves (again if the branch moved meanwhile); raising stops the import.

        Raises:
            DirtyBranchError: the branch has uncommitted changes.
            ReadOnlyRepositoryError / ProtectedBranchError: writes refused.
        """
        repo = self._check_direct_write(repo_id, branch_name)
        ranges = self.ranges_for(repo)
        prefixes = sorted(set(replaced_prefixes))

        def attempt() -> CommitRecord:
            branch = self.refstore.get_branch(repo_id, branch_name)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            head = self.get_commit(repo_id, branch.commit_id).commit
            replaced = [ranges.iterate(head.metarange_id, prefix=p) for p in prefixes]
            changes = _replace_with(ranges.iterate(source_metarange), replaced)
            result = ranges.apply(head.metarange_id, changes)
            commit = Commit(parents=(branch.commit_id,), metarange_id=result.metarange_id,
                            message=message, committer=committer, creation_date=self._now(),
                            metadata=dict(metadata or {}), generation=head.generation + 1)
            if before_commit is not None:
                before_commit()
            return self._land(repo_id, branch, commit)

        return self._retrying()(attempt)

    def create_commit_record(self, repo_id: str, commit_id: str,
                             commit: Commit) -> CommitRecord:
        """Write a commit record as given, moving no ref (lakeFS's createCommitRecord).

        Ids here are content hashes, so the record must hash to ``commit_id``: a record
        under another id could not be told apart from a forged one.

        Raises:
            ValidationError: ``commit_id`` is not the record's hash, or ``generation`` is
                not above every parent's.
            CommitNotFoundError / RangeNotFoundError: a parent or the metarange is absent.
            CommitExistsError: a commit with this id exists.
            ReadOnlyRepositoryError: the repository is read-only.
        """
        repo = self._writable_repo(repo_id)
        if not is_commit_id(commit_id):
            raise ValidationError(f"invalid commit id {commit_id!r}")
        if not is_commit_id(commit.metarange_id):
            raise ValidationError(f"invalid metarange id {commit.metarange_id!r}")
        expected = commit_id_of(commit)
        if commit_id != expected:
            raise ValidationError(
                f"commit id {commit_id} does not match the record's content ({expected})")
        parents = [self.get_commit(repo_id, p).commit for p in commit.parents]
        if parents and commit.generation <= max(p.generation for p in parents):
            raise ValidationError("generation must be greater than every parent's")
        if commit.generation < 1:
            raise ValidationError("generation must be positive")
        self.ranges_for(repo).get_metarange(commit.metarange_id)
        try:
            self.get_commit(repo_id, commit_id)
        except CommitNotFoundError:
            pass
        else:
            raise CommitExistsError(f"commit {commit_id} already exists")
        # not marked present in a (detached) mirror: its pieces were not proven there
        self.refstore.put_commit(repo_id, commit_id, commit)
        return CommitRecord(commit_id, commit)

    def _unseal(self, repo_id: str, sealed: Branch, restored: Branch) -> None:
        """Move sealed records back into the live token after a failed commit."""
        for token in reversed(sealed.sealed_tokens):
            for rec in self.refstore.list_staged(repo_id, token):
                if self.refstore.get_staged(repo_id, restored.staging_token, rec.path) is None:
                    self.refstore.put_staged(repo_id, restored.staging_token, rec)
        self.refstore.update_branch(repo_id, sealed, restored)
        for token in sealed.sealed_tokens:
            self.refstore.drop_staging(repo_id, token)

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
            base = self.servable_merge_base(repo, left.id, right.id)
            left_mr = (self.get_commit(repo_id, base).commit.metarange_id if base
                       else self.ranges_for(repo).empty_metarange())
        it = self.ranges_for(repo).diff(left_mr, right.commit.metarange_id, prefix=prefix,
                                        after=after)
        return page_of(it, amount)

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

        As lakeFS, the commit's metadata names the strategy (``.lakefs.merge.strategy``:
        ``default``, ``dest-wins`` or ``source-wins``). Protected branches accept merges.
        Raises NoChangesError, MergeConflictError,
        DirtyBranchError (destination has uncommitted changes).
        """
        self._writable_repo(repo_id)
        if strategy not in (None, "", *[s.value for s in MergeStrategy]):
            raise ValidationError(f"unknown merge strategy {strategy!r}")
        source = self.resolve_ref(repo_id, source_ref).commit_id
        self._readable_commit(self.refstore.get_repository(repo_id), source)
        merge_message = message or f"Merge '{source_ref}' into '{dest_branch}'"
        merge_metadata = {**(metadata or {}),
                          MERGE_STRATEGY_KEY: strategy or DEFAULT_MERGE_STRATEGY}
        repo = self._writable_repo(repo_id)
        self.refstore.get_branch(repo_id, dest_branch)  # BranchNotFoundError before hooks
        run_id = self.hooks.pre(HookRecord(
            EventType.PRE_MERGE, repo, source_ref=source_ref, branch_id=dest_branch,
            commit_message=merge_message, committer=committer,
            commit_metadata=merge_metadata, acting_user=committer))

        def attempt() -> CommitRecord:
            repo = self._writable_repo(repo_id)
            branch = self.refstore.get_branch(repo_id, dest_branch)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            dest = branch.commit_id
            # already merged: nothing to do, unless an (empty) merge commit is asked for
            if self.is_ancestor(repo_id, source, dest) and not allow_empty:
                raise NoChangesError(f"update branch {dest_branch}: no changes")
            base = self.servable_merge_base(repo, source, dest)
            rm = self.ranges_for(repo)
            base_mr = (self.get_commit(repo_id, base).commit.metarange_id if base
                       else rm.empty_metarange())
            src_c = self.get_commit(repo_id, source).commit
            dst_c = self.get_commit(repo_id, dest).commit
            result = rm.merge(base_mr, src_c.metarange_id, dst_c.metarange_id,
                              strategy or None)
            if result.metarange_id == dst_c.metarange_id and not allow_empty:
                raise NoChangesError(f"update branch {dest_branch}: no changes")
            commit = Commit(
                parents=(dest,) if squash or source == dest else (dest, source),
                metarange_id=result.metarange_id,
                message=merge_message,
                committer=committer, creation_date=self._now(),
                metadata=merge_metadata,
                generation=(dst_c.generation if squash
                            else max(src_c.generation, dst_c.generation)) + 1)
            return self._land(repo_id, branch, commit)

        rec = self._retrying()(attempt)
        self.hooks.post(HookRecord(
            EventType.POST_MERGE, repo, source_ref=rec.id, branch_id=dest_branch,
            commit_id=rec.id, commit_message=merge_message, committer=committer,
            commit_metadata=merge_metadata, acting_user=committer), run_id)
        return rec

    def _land(self, repo_id: str, branch: Branch, commit: Commit) -> CommitRecord:
        """Write a commit and move the branch to it (CAS on the branch as read)."""
        cid = commit_id_of(commit)
        self._put_local_commit(repo_id, cid, commit)
        self.refstore.update_branch(repo_id, branch, replace(branch, commit_id=cid),
                                    writable=True)
        self._notify(repo_id, branch.name)
        return CommitRecord(cid, commit)

    def _pick(self, repo_id: str, branch_name: str, base_mr_of: Callable[[Commit], str],
              target_mr_of: Callable[[Commit], str], ref: str, message: Callable[[str], str],
              committer: str, metadata_of: Callable[[CommitRecord], Mapping[str, str]],
              events: tuple[EventType, EventType]) -> CommitRecord:
        repo = self._check_direct_write(repo_id, branch_name, commit=True)
        picked = self._commit_of_ref(repo_id, ref)
        self._readable_commit(repo, picked.id)
        pick_message = message(picked.id)
        pick_metadata = dict(metadata_of(picked))
        pre, post = events
        run_id = self.hooks.pre(HookRecord(
            pre, repo, source_ref=branch_name, branch_id=branch_name,
            commit_message=pick_message, committer=committer,
            commit_metadata=pick_metadata, acting_user=committer))

        def attempt() -> CommitRecord:
            repo = self._writable_repo(repo_id)
            branch = self.refstore.get_branch(repo_id, branch_name)
            if self.has_uncommitted(repo_id, branch):
                raise DirtyBranchError()
            head = self.get_commit(repo_id, branch.commit_id).commit
            result = self.ranges_for(repo).merge(base_mr_of(picked.commit),
                                                 target_mr_of(picked.commit), head.metarange_id)
            if result.metarange_id == head.metarange_id:
                raise NoChangesError("update branch: no changes")
            commit = Commit(parents=(branch.commit_id,), metarange_id=result.metarange_id,
                            message=pick_message, committer=committer,
                            creation_date=self._now(), metadata=pick_metadata,
                            generation=head.generation + 1)
            return self._land(repo_id, branch, commit)

        rec = self._retrying()(attempt)
        self.hooks.post(HookRecord(
            post, repo, source_ref=rec.id, branch_id=branch_name, commit_id=rec.id,
            commit_message=pick_message, committer=committer,
            commit_metadata=pick_metadata, acting_user=committer), run_id)
        return rec

    def _parent_mr(self, repo_id: str, commit: Commit, parent_number: int) -> str:
        if not commit.parents:
            raise ValidationError("cannot use a commit with no parents")
        if len(commit.parents) > 1 and parent_number < 1:
            raise ValidationError("parent_number is required for a merge commit")
        n = max(parent_number, 1)
        if n > len(commit.parents):
            raise ValidationError(f"commit has no parent number {n}")
        parent = commit.parents[n - 1]
        return self._readable_commit(self.refstore.get_repository(repo_id), parent).metarange_id

    def revert(self, repo_id: str, branch_name: str, ref: str, committer: str, *,
               parent_number: int = 0, message: str | None = None,
               metadata: Mapping[str, str] | None = None) -> CommitRecord:
        """A new commit on the branch undoing the changes ``ref`` made to its parent.

        As lakeFS: the message is ``Revert <ref>`` (the ref as given) and the commit has
        no metadata; ``message`` and ``metadata`` replace them.
        """
        return self._pick(
            repo_id, branch_name,
            base_mr_of=lambda c: c.metarange_id,
            target_mr_of=lambda c: self._parent_mr(repo_id, c, parent_number),
            ref=ref, message=lambda _cid: message or f"Revert {ref}", committer=committer,
            metadata_of=lambda _picked: metadata if metadata is not None else {},
            events=(EventType.PRE_REVERT, EventType.POST_REVERT))

    def cherry_pick(self, repo_id: str, branch_name: str, ref: str, committer: str, *,
                    parent_number: int = 0, message: str | None = None,
                    metadata: Mapping[str, str] | None = None) -> CommitRecord:
        """A new commit on the branch applying the changes ``ref`` made to its parent.

        As lakeFS, the commit keeps the picked commit's message and metadata (``message``
        replaces the one, ``metadata`` is laid over the other) and adds
        ``cherry-pick-origin`` (the picked commit's id) and ``cherry-pick-committer``
        (its committer).
        """
        def metadata_of(picked: CommitRecord) -> dict[str, str]:
            return {**picked.commit.metadata, **(metadata or {}),
                    CHERRY_PICK_ORIGIN: picked.id,
                    CHERRY_PICK_COMMITTER: picked.commit.committer}

        return self._pick(
            repo_id, branch_name,
            base_mr_of=lambda c: self._parent_mr(repo_id, c, parent_number),
            target_mr_of=lambda c: c.metarange_id,
            ref=ref,
            message=lambda cid: message or self.get_commit(repo_id, cid).commit.message,
            committer=committer, metadata_of=metadata_of,
            events=(EventType.PRE_CHERRY_PICK, EventType.POST_CHERRY_PICK))

    def hard_reset(self, repo_id: str, branch_name: str, ref: str) -> Branch:
        """Point the branch at ``ref``'s commit, dropping uncommitted changes.

        Raises:
            CommitNotFoundError: in a (detached) former mirror, a commit replication
                never proved present: no ref may point at what cannot be read.
        """
        repo = self._check_direct_write(repo_id, branch_name)
        target = self.resolve_ref(repo_id, ref).commit_id
        self.visibility.check_servable(repo, target)

        def attempt() -> Branch:
            branch = self.refstore.get_branch(repo_id, branch_name)
            new = Branch(name=branch.name, commit_id=target, staging_token=new_token())
            self.refstore.update_branch(repo_id, branch, new, writable=True)
            for token in (branch.staging_token, *branch.sealed_tokens):
                self.refstore.drop_staging(repo_id, token)
            return new

        moved = self._retrying()(attempt)
        self._notify(repo_id, branch_name)
        return moved


def _replace_with(imported: Iterator[EntryRecord],
                  replaced: Iterable[Iterator[EntryRecord]]) -> Iterator[EntryRecord]:
    """Changes that set every imported record and delete every replaced path that the
    import lacks, sorted by path (replaced streams may overlap)."""
    old = heapq.merge(*replaced, key=lambda r: r.path)
    new = next(imported, None)
    gone = next(old, None)
    while new is not None or gone is not None:
        if gone is None or (new is not None and new.path <= gone.path):
            assert new is not None
            if gone is not None and gone.path == new.path:
                gone = next(old, None)
                continue  # the same path may come again from an overlapping prefix
            yield new
            new = next(imported, None)
        else:
            path = gone.path
            yield EntryRecord(path, None)
            while gone is not None and gone.path == path:
                gone = next(old, None)
