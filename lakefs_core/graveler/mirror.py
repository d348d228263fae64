"""The engine's mirroring interface: the only way replication changes a mirror.

Mirror repositories are read-only to every client; replication writes them through
:class:`MirrorService`, which owns every rule about them (docs/ARCHITECTURE.md,
"The mirror lifecycle"):

- a mirror repository carries a :class:`MirrorMarking` from its creation;
- commit records are written only when their id is the hash of their content;
- a commit becomes servable once it is recorded as proven present;
- a branch or tag moves only to a present commit, a branch by compare-and-swap, so
  two replicas racing never double-promote or move a branch backwards over each other.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakefs_core.block.base import BlockStore
from lakefs_core.errors import (
    BranchChangedError,
    BranchExistsError,
    BranchNotFoundError,
    CommitNotFoundError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.encoding import commit_id as commit_id_of
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import (
    Branch,
    BranchUpdate,
    Commit,
    CommitRecord,
    MirrorMarking,
    Repository,
    Tag,
)
from lakefs_core.graveler.refstores import open_refstore_for
from lakefs_core.refstore.base import RefStore

if TYPE_CHECKING:
    from lakefs_core.config import DatabaseConfig

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class BranchMove:
    """One branch of :meth:`MirrorService.promote_branches`: from ``expected`` (None: the
    branch has no head yet) to ``new``."""

    repo: str
    branch: str
    expected: str | None
    new: str


class MirrorService:
    """Mirror repositories of one region's refstore, as replication sees them.

    Args:
        graveler: the engine over the region's refstore.
    """

    def __init__(self, graveler: Graveler) -> None:
        self._graveler = graveler
        self._refstore = graveler.refstore

    @classmethod
    def over(cls, refstore: RefStore, store_for: Callable[[str], BlockStore]) -> MirrorService:
        """The service over an open refstore (closed by :meth:`close`)."""
        return cls(Graveler(refstore, store_for))

    @classmethod
    def open(cls, database: DatabaseConfig,
             store_for: Callable[[str], BlockStore]) -> MirrorService:
        """Open the service over the refstore of the server's ``database`` settings
        block (local, postgres or dynamodb), as the server opens it; a DynamoDB table
        must exist (the server creates it).

        Raises:
            ValidationError: the block lacks what its type needs.
            DatabaseError: the database cannot be reached or initialized, or the
                DynamoDB table does not exist.
        """
        return cls.over(open_refstore_for(database, create_table=False), store_for)

    def close(self) -> None:
        self._refstore.close()

    # --- repositories ---------------------------------------------------------------------
    def repository(self, name: str) -> Repository:
        """Raises RepositoryNotFoundError."""
        return self._refstore.get_repository(name)

    def marking(self, name: str) -> MirrorMarking | None:
        """The repository's mirror marking; None if it is no mirror or does not exist."""
        try:
            return self._refstore.get_mirror_marking(name)
        except RepositoryNotFoundError:
            return None

    def create_repository(self, name: str, namespace: str, default_branch: str,
                          marking: MirrorMarking, storage_id: str = "") -> Repository:
        """Create the read-only mirror repository (idempotent for the same mirror).

        Raises:
            RepositoryExistsError: another repository (or another mirror's) has the name.
        """
        try:
            return self._graveler.create_repository(
                name, namespace, default_branch, storage_id=storage_id, read_only=True,
                initial_commit=False, mirror=marking)
        except RepositoryExistsError:  # another replica's, or another repository
            existing = self.marking(name)
            if existing is None or existing.mirror_id != marking.mirror_id:
                raise
            return self._refstore.get_repository(name)

    def set_read_only(self, name: str, read_only: bool) -> Repository:
        """Make an ordinary repository read-only (a switchover freezes its source so) or
        writable again; a mirror that still follows its source stays read-only.

        Raises:
            RepositoryNotFoundError: no such repository.
            ValidationError: ``read_only`` false for a mirror that follows its source.
        """
        marking = self.marking(name)
        if not read_only and marking is not None and not marking.detached:
            raise ValidationError(f"repository {name!r} is a mirror: it stays read-only")
        repo = self._refstore.get_repository(name)
        if repo.read_only == read_only:
            return repo
        return self._graveler.set_read_only(name, read_only)

    def adopt_repository(self, name: str, marking: MirrorMarking
                         ) -> tuple[Repository, list[str]]:
        """Make an existing repository the read-only mirror ``marking`` names: the former
        source of a switchover, or the old primary of a failback, which then follows the
        new primary under its own name.

        Uncommitted changes of its branches are discarded (a mirror has none, and they
        would come back as a dirty branch when it becomes a primary again): the answer
        names the branches that had some.

        An ordinary repository (never a mirror) wrote every one of its commits itself:
        each is marked proven present, so all stay servable. A detached former mirror
        keeps its marks as they are: the commits replication proved present and those
        made since it was detached are servable, and the commits it only learned of
        (skipped between two observed heads, or still waiting for pieces) stay unservable
        (I2). From then on it serves only the commits replication proves present. The
        repository must already be read-only, so that no write lands after its refs were
        read. Idempotent for the same mirror.

        Raises:
            RepositoryNotFoundError: no such repository.
            ValidationError: it is writable, or it follows another mirror.
        """
        repo = self._refstore.get_repository(name)
        existing = self.marking(name)
        if existing is not None and existing.mirror_id == marking.mirror_id:
            return repo, []
        if existing is not None and not existing.detached:
            raise ValidationError(f"repository {name!r} follows mirror {existing.mirror_id}")
        if not repo.read_only:
            raise ValidationError(f"repository {name!r} must be read-only to be adopted")
        discarded = self._discard_uncommitted(name)
        if existing is None:
            after = ""
            while True:
                records = self._refstore.list_commits(name, after=after, amount=_PAGE)
                for record in records:
                    self._refstore.mark_commit_present(name, record.id)
                if len(records) < _PAGE:
                    break
                after = records[-1].id
        self._refstore.set_mirror_marking(name, marking)
        return repo, discarded

    def _discard_uncommitted(self, name: str) -> list[str]:
        """Give every branch with uncommitted changes a fresh, empty staging area (the
        repository is read-only: nothing stages meanwhile); the branches that had some."""
        discarded = []
        for branch_name in self.branches(name):
            branch = self._refstore.get_branch(name, branch_name)
            if not self._graveler.has_uncommitted(name, branch):
                continue
            self._refstore.update_branch(name, branch, Branch(
                branch.name, branch.commit_id, uuid.uuid4().hex))
            for token in (branch.staging_token, *branch.sealed_tokens):
                self._refstore.drop_staging(name, token)
            discarded.append(branch_name)
        return discarded

    def keep_branch(self, repo: str, branch: str, commit_id: str) -> None:
        """Create a branch of a writable (detached) repository at a written commit whose
        pieces were proven present, so that it stays reachable there.

        Raises:
            CommitNotFoundError: the commit record was not written first.
            BranchExistsError: the branch exists.
            ValidationError: the repository still follows its source.
        """
        marking = self.marking(repo)
        if marking is not None and not marking.detached:
            raise ValidationError(f"repository {repo!r} follows its source: no branch is "
                                  "created in it")
        self.mark_present(repo, commit_id)
        self._refstore.create_branch(repo, Branch(branch, commit_id, uuid.uuid4().hex))

    def mark_detached(self, name: str, mirror_id: str) -> None:
        """Record that the repository was detached from its mirror (kept on deletion)."""
        existing = self.marking(name)
        if existing is None or existing.mirror_id != mirror_id:
            raise RepositoryNotFoundError(f"repository {name!r} is not mirror {mirror_id}")
        self._refstore.set_mirror_marking(name, MirrorMarking(
            existing.mirror_id, existing.source_region, existing.source_repository,
            detached=True))

    def delete_repository(self, name: str, mirror_id: str) -> bool:
        """Delete the mirror repository if it is this mirror's. False if already gone.

        A detached repository belongs to its users now and is never deleted here.
        """
        existing = self.marking(name)
        if existing is None or existing.mirror_id != mirror_id or existing.detached:
            return False
        self._refstore.delete_repository(name)
        return True

    def detach(self, name: str) -> Repository:
        """Make the mirror an ordinary writable repository at its current heads."""
        repo = self._refstore.get_repository(name)
        if repo.read_only:
            repo = self._graveler.set_read_only(name, False)
        return repo

    # --- commits --------------------------------------------------------------------------
    def has_commit(self, repo: str, commit_id: str) -> bool:
        try:
            self._refstore.get_commit(repo, commit_id)
        except CommitNotFoundError:
            return False
        return True

    def get_commit(self, repo: str, commit_id: str) -> Commit:
        """Raises CommitNotFoundError."""
        return self._graveler.get_commit(repo, commit_id).commit

    def write_commits(self, repo: str, records: Iterable[CommitRecord]) -> int:
        """Write commit records, oldest first (so a known commit's ancestors are known).

        Raises:
            ValidationError: a record's id is not the hash of its content.
        """
        n = 0
        for rec in records:
            if commit_id_of(rec.commit) != rec.id:
                raise ValidationError(f"commit record {rec.id} does not match its content")
            self._refstore.put_commit(repo, rec.id, rec.commit)
            n += 1
        return n

    def mark_present(self, repo: str, commit_id: str) -> None:
        """Record that every piece of a (written) commit is present in the mirror.

        Raises:
            CommitNotFoundError: the commit record was not written first.
        """
        if not self.has_commit(repo, commit_id):
            raise CommitNotFoundError(f"commit {commit_id!r} not found in {repo!r}")
        self._refstore.mark_commit_present(repo, commit_id)

    def is_present(self, repo: str, commit_id: str) -> bool:
        return self._refstore.is_commit_present(repo, commit_id)

    def _require_following(self, repo: str) -> None:
        """Refuse to move a ref of a repository that no longer follows its source: a
        round of replication that was under way when the mirror was detached (or
        switched over) must not touch what its users own now."""
        marking = self.marking(repo)
        if marking is not None and marking.detached:
            raise ValidationError(f"repository {repo!r} was detached: replication leaves "
                                  "its refs alone")

    def _require_present(self, repo: str, commit_id: str) -> None:
        if not self._refstore.is_commit_present(repo, commit_id):
            raise CommitNotFoundError(
                f"commit {commit_id} is not proven present in mirror {repo!r}")

    # --- branches and tags ----------------------------------------------------------------
    def branch_head(self, repo: str, branch: str) -> str | None:
        try:
            return self._refstore.get_branch(repo, branch).commit_id or None
        except BranchNotFoundError:
            return None

    def promote_branch(self, repo: str, branch: str, expected: str | None, new: str) -> None:
        """Move (or create) a mirror branch from ``expected`` to ``new``.

        Raises:
            CommitNotFoundError: ``new`` is not proven present.
            BranchChangedError: the branch is not at ``expected`` any more.
            ValidationError: the repository was detached.
        """
        self._require_following(repo)
        self._require_present(repo, new)
        if expected is None:
            try:
                current = self._refstore.get_branch(repo, branch)
            except BranchNotFoundError:
                try:
                    self._refstore.create_branch(repo, Branch(branch, new, uuid.uuid4().hex))
                except BranchExistsError as e:
                    raise BranchChangedError(f"branch {branch!r} appeared meanwhile") from e
                return
            if current.commit_id:
                raise BranchChangedError(f"branch {branch!r} moved meanwhile")
        else:
            current = self._refstore.get_branch(repo, branch)
            if current.commit_id != expected:
                raise BranchChangedError(f"branch {branch!r} is at {current.commit_id}, "
                                         f"not {expected}")
        self._refstore.update_branch(repo, current, Branch(current.name, new,
                                                           current.staging_token))

    def promote_branches(self, moves: Sequence[BranchMove]) -> None:
        """Move several mirror branches, of one or several mirror repositories, in one
        transaction of the refstore: all of them or none (a mirror group's cut, I8).

        Each moves by compare-and-swap from ``expected``, as :meth:`promote_branch`.

        Raises:
            CommitNotFoundError: a ``new`` is not proven present; nothing moved.
            BranchChangedError: a branch is not at its ``expected`` any more (or another
                promotion raced this one); nothing moved.
            ValidationError: a repository was detached; nothing moved.
        """
        for move in moves:
            self._require_following(move.repo)
            self._require_present(move.repo, move.new)
        current = self._refstore.get_branches([(m.repo, m.branch) for m in moves])
        updates: list[BranchUpdate] = []
        for move in moves:
            branch = current.get((move.repo, move.branch))
            head = branch.commit_id if branch is not None else ""
            if head != (move.expected or ""):
                raise BranchChangedError(f"branch {move.branch!r} of {move.repo!r} is at "
                                         f"{head or 'nothing'}, not {move.expected}")
            if branch is None:
                updates.append(BranchUpdate(move.repo, None,
                                            Branch(move.branch, move.new, uuid.uuid4().hex)))
            else:
                updates.append(BranchUpdate(move.repo, branch, Branch(
                    branch.name, move.new, branch.staging_token)))
        self._refstore.update_branches(updates)

    def heads_at_once(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The heads of several branches, of one or several repositories, read at one
        snapshot of the refstore (a mirror group's cut, on the source side): no commit
        of one branch is seen without the commits that reached the others before it.
        A branch without a head (or missing) is left out."""
        return {ref: b.commit_id
                for ref, b in self._refstore.get_branches(refs).items() if b.commit_id}

    def delete_branch(self, repo: str, branch: str) -> None:
        """Remove a mirror branch; the default branch stays at its last consistent commit."""
        self._require_following(repo)
        repository = self._refstore.get_repository(repo)
        if branch == repository.default_branch:
            return
        with contextlib.suppress(BranchNotFoundError):
            self._refstore.delete_branch(repo, branch)

    def branches(self, repo: str) -> dict[str, str]:
        """Every branch of the mirror and its head."""
        return _all_refs(lambda after: self._refstore.list_branches(repo, after=after,
                                                                      amount=_PAGE))

    def listed_branches(self, repo: str) -> dict[str, str]:
        """Every branch of a repository that the API lists (not hidden) and its head:
        what a mirror of it follows."""
        return {name: head for name, head in self.branches(repo).items()
                if not self._refstore.is_branch_hidden(repo, name)}

    def tags(self, repo: str) -> dict[str, str]:
        """Every tag of the mirror and its commit."""
        return _all_refs(lambda after: self._refstore.list_tags(repo, after=after,
                                                                  amount=_PAGE))

    def set_tag(self, repo: str, name: str, commit_id: str) -> None:
        """Point a tag at a present commit (replacing where it pointed).

        Raises:
            CommitNotFoundError: the commit is not proven present.
            ValidationError: the repository was detached.
        """
        self._require_following(repo)
        self._require_present(repo, commit_id)
        try:
            current = self._refstore.get_tag(repo, name)
        except TagNotFoundError:
            current = None
        if current is not None:
            if current.commit_id == commit_id:
                return
            self._refstore.delete_tag(repo, name)
        with contextlib.suppress(TagExistsError):  # another replica set it meanwhile
            self._refstore.create_tag(repo, Tag(name, commit_id))

    def delete_tag(self, repo: str, name: str) -> None:
        self._require_following(repo)
        with contextlib.suppress(TagNotFoundError):
            self._refstore.delete_tag(repo, name)


def _all_refs(page_after: Callable[[str], Sequence[Branch | Tag]]) -> dict[str, str]:
    """Every ref of a listing read page by page: name -> commit id."""
    out: dict[str, str] = {}
    after = ""
    while True:
        page = page_after(after)
        out.update({ref.name: ref.commit_id for ref in page})
        if len(page) < _PAGE:
            return out
        after = page[-1].name
