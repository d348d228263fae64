"""Ref resolution and history: ref expressions, the commit log, merge bases."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from lakefs_core.errors import (
    BranchNotFoundError,
    InvalidRefError,
    RefNotFoundError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.core import EngineCore
from lakefs_core.graveler.model import (
    Branch,
    CommitRecord,
    Repository,
)
from lakefs_core.graveler.refs import (
    ModifierType,
    RefExpression,
    could_be_short_commit_id,
    is_commit_id,
    parse_ref,
)


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


def branch_ref(branch: Branch) -> ResolvedRef:
    """A plain branch ref. Raises RefNotFoundError for a branch with no commit yet."""
    if not branch.commit_id:
        raise RefNotFoundError(f"branch {branch.name!r} has no commit yet")
    return ResolvedRef(RefType.BRANCH, branch.commit_id, branch)


class RefResolver(EngineCore):
    """Resolves ref expressions (branch, tag, commit id, ``~N``, ``^N``, ``@``); walks history."""

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
        return branch_ref(branch)

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

    def _commit_of_ref(self, repo_id: str, ref: str) -> CommitRecord:
        return self.get_commit(repo_id, self.resolve_ref(repo_id, ref).commit_id)

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

    def servable_merge_base(self, repo: Repository, left: str, right: str) -> str | None:
        """The merge base of two commits whose data this repository holds, or None.

        In an ordinary repository this is the merge base. A detached former mirror may
        hold commits in its history whose data never arrived (replication proved only
        the commits its branches moved to): there the base is the nearest ancestor of
        the true base that was proven present. Any common ancestor is a valid base; an
        older one can only turn changes both sides share into conflicts, never lose one.
        """
        base = self.find_merge_base(repo.id, left, right)
        if base is None or self.visibility.is_servable(repo, base):
            return base
        first = self.get_commit(repo.id, base).commit
        heap: list[tuple[int, str]] = [(-first.generation, base)]
        seen = {base}
        while heap:
            _, cid = heapq.heappop(heap)
            if self.visibility.is_servable(repo, cid):
                return cid
            for pid in self.get_commit(repo.id, cid).commit.parents:
                if pid not in seen:
                    seen.add(pid)
                    heapq.heappush(heap, (-self.get_commit(repo.id, pid).commit.generation,
                                          pid))
        return None

    def is_ancestor(self, repo_id: str, ancestor: str, descendant: str) -> bool:
        return self.find_merge_base(repo_id, ancestor, descendant) == ancestor
