"""The only writer of mirror repositories: commit records, branch and tag moves.

Mirror repositories are read-only to every client (I4); this module writes to the
destination refstore directly (the sidecar shares the destination server's
database, ``refstore_database``), bypassing the read-only check. Every branch move
is a compare-and-swap on the branch row, so two replicas racing never double-promote
or move a branch backwards over each other.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from lakefs_core.errors import (
    BranchChangedError,
    BranchExistsError,
    BranchNotFoundError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
)
from lakefs_core.graveler.graveler import MIRROR_SETTING, PRESENT_PREFIX, Graveler
from lakefs_core.graveler.model import Branch, CommitRecord, Repository, Tag


@dataclass(frozen=True, slots=True)
class MirrorDescription:
    mirror_id: str
    source_region: str
    source_repository: str
    detached: bool = False


class MirrorWriter:
    """Writes a mirror repository in this region's refstore."""

    def __init__(self, graveler: Graveler) -> None:
        self.graveler = graveler
        self.refstore = graveler.refstore

    # --- repository lifecycle -------------------------------------------------------------
    def create_repository(self, name: str, namespace: str, default_branch: str,
                          description: MirrorDescription, storage_id: str = "") -> Repository:
        """Create the read-only mirror repository (idempotent for the same mirror)."""
        try:
            repo = self.graveler.create_repository(
                name, namespace, default_branch, storage_id=storage_id, read_only=True,
                initial_commit=False)
        except RepositoryExistsError:
            existing = self.describe(name)
            if existing is None or existing.mirror_id != description.mirror_id:
                raise
            return self.refstore.get_repository(name)
        self.refstore.set_setting(name, MIRROR_SETTING, json.dumps({
            "mirror_id": description.mirror_id,
            "source_region": description.source_region,
            "source_repository": description.source_repository,
        }))
        return repo

    def describe(self, name: str) -> MirrorDescription | None:
        try:
            raw = self.refstore.get_setting(name, MIRROR_SETTING)
        except RepositoryNotFoundError:
            return None
        if raw is None:
            return None
        data = json.loads(raw)
        return MirrorDescription(data["mirror_id"], data["source_region"],
                                 data["source_repository"], bool(data.get("detached")))

    def mark_detached(self, name: str, mirror_id: str) -> None:
        """Record that the repository was detached from its mirror (kept on deletion)."""
        existing = self.describe(name)
        if existing is None or existing.mirror_id != mirror_id:
            raise RepositoryNotFoundError(f"repository {name!r} is not mirror {mirror_id}")
        self.refstore.set_setting(name, MIRROR_SETTING, json.dumps({
            "mirror_id": existing.mirror_id, "source_region": existing.source_region,
            "source_repository": existing.source_repository, "detached": True}))

    def delete_repository(self, name: str, mirror_id: str) -> bool:
        """Delete the mirror repository if it is this mirror's. False if already gone.

        A detached repository belongs to its users now and is never deleted here.
        """
        existing = self.describe(name)
        if existing is None or existing.mirror_id != mirror_id or existing.detached:
            return False
        self.refstore.delete_repository(name)
        return True

    def detach(self, name: str) -> Repository:
        """Make the mirror an ordinary writable repository at its current heads."""
        repo = self.refstore.get_repository(name)
        if repo.read_only:
            repo = self.graveler.set_read_only(name, False)
        return repo

    # --- commits -------------------------------------------------------------------------
    def has_commit(self, repo: str, commit_id: str) -> bool:
        try:
            self.refstore.get_commit(repo, commit_id)
        except Exception:  # noqa: BLE001 - any miss means "write it"
            return False
        return True

    def write_commits(self, repo: str, records: Iterable[CommitRecord]) -> int:
        """Write commit records, oldest first (so a known commit's ancestors are known)."""
        n = 0
        for rec in records:
            self.refstore.put_commit(repo, rec.id, rec.commit)
            n += 1
        return n

    def mark_present(self, repo: str, commit_id: str) -> None:
        self.graveler.mark_commit_present(repo, commit_id)

    def is_present(self, repo: str, commit_id: str) -> bool:
        return self.refstore.get_setting(repo, PRESENT_PREFIX + commit_id) is not None

    # --- branches and tags -----------------------------------------------------------------
    def branch_head(self, repo: str, branch: str) -> str | None:
        try:
            return self.refstore.get_branch(repo, branch).commit_id or None
        except BranchNotFoundError:
            return None

    def promote_branch(self, repo: str, branch: str, expected: str | None, new: str) -> None:
        """Move (or create) a mirror branch from ``expected`` to ``new``.

        Raises:
            BranchChangedError: the branch is not at ``expected`` any more.
        """
        if expected is None:
            try:
                current = self.refstore.get_branch(repo, branch)
            except BranchNotFoundError:
                try:
                    self.refstore.create_branch(repo, Branch(branch, new, uuid.uuid4().hex))
                except BranchExistsError as e:
                    raise BranchChangedError(f"branch {branch!r} appeared meanwhile") from e
                return
            if current.commit_id:
                raise BranchChangedError(f"branch {branch!r} moved meanwhile")
        else:
            current = self.refstore.get_branch(repo, branch)
            if current.commit_id != expected:
                raise BranchChangedError(f"branch {branch!r} is at {current.commit_id}, "
                                         f"not {expected}")
        self.refstore.update_branch(repo, current, Branch(current.name, new,
                                                          current.staging_token))

    def delete_branch(self, repo: str, branch: str) -> None:
        repository = self.refstore.get_repository(repo)
        if branch == repository.default_branch:
            return  # the default branch stays at its last consistent commit
        with contextlib.suppress(BranchNotFoundError):
            self.refstore.delete_branch(repo, branch)

    def branches(self, repo: str) -> dict[str, str]:
        out: dict[str, str] = {}
        after = ""
        while True:
            page = self.refstore.list_branches(repo, after=after, amount=1000)
            out.update({b.name: b.commit_id for b in page})
            if len(page) < 1000:
                return out
            after = page[-1].name

    def tags(self, repo: str) -> dict[str, str]:
        out: dict[str, str] = {}
        after = ""
        while True:
            page = self.refstore.list_tags(repo, after=after, amount=1000)
            out.update({t.name: t.commit_id for t in page})
            if len(page) < 1000:
                return out
            after = page[-1].name

    def set_tag(self, repo: str, name: str, commit_id: str) -> None:
        try:
            current = self.refstore.get_tag(repo, name)
        except TagNotFoundError:
            current = None
        if current is not None:
            if current.commit_id == commit_id:
                return
            self.refstore.delete_tag(repo, name)
        try:
            self.refstore.create_tag(repo, Tag(name, commit_id))
        except TagExistsError:
            pass  # another replica set it meanwhile

    def delete_tag(self, repo: str, name: str) -> None:
        with contextlib.suppress(TagNotFoundError):
            self.refstore.delete_tag(repo, name)
