"""The versioning engine's service: repositories, branches, tags, and every operation.

:class:`Graveler` ties the refstore (rows: repositories, branches, commits, staged
entries) to the range files (:class:`RangeManager`, one per storage namespace) and
implements the Git-like operations on top. It is built in layers, one module each:
:mod:`~lakefs_core.graveler.core` (stores, caches, write checks),
:mod:`~lakefs_core.graveler.resolution` (refs and history),
:mod:`~lakefs_core.graveler.staging` (staging and objects),
:mod:`~lakefs_core.graveler.committing` (commit and merge),
:mod:`~lakefs_core.graveler.pulls` (pull requests), and
:mod:`~lakefs_core.graveler.visibility` (which commits a mirror may serve).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import replace

from lakefs_core.block.registry import (
    namespaces_overlap,
    repository_namespace,
    validate_namespace,
)
from lakefs_core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    BranchProtectionRuleExistsError,
    BranchProtectionRuleNotFoundError,
    CannotDeleteDefaultBranchError,
    ProtectedBranchError,
    RepositoryExistsError,
    StorageNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.committing import MergeStrategy
from lakefs_core.graveler.core import INITIAL_COMMIT_MESSAGE, new_token
from lakefs_core.graveler.encoding import commit_id as commit_id_of
from lakefs_core.graveler.hooks import EventType, HookRecord
from lakefs_core.graveler.model import (
    Branch,
    Commit,
    MirrorMarking,
    Repository,
    Tag,
)
from lakefs_core.graveler.pulls import PullRequestEngine
from lakefs_core.graveler.refs import (
    validate_branch_name,
    validate_repository_id,
    validate_tag_name,
)
from lakefs_core.graveler.resolution import RefType, ResolvedRef
from lakefs_core.graveler.staging import ListingItem, merge_sorted_records


class Graveler(PullRequestEngine):
    """The versioning engine: every operation, over a refstore and its blockstores.

    Built with the arguments of :class:`~lakefs_core.graveler.core.EngineCore`.
    """

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
        mirror: MirrorMarking | None = None,
    ) -> Repository:
        """Create a repository whose first commit is "Repository created" (empty).

        With ``initial_commit=False`` (a mirror) the default branch points at no
        commit until replication promotes one. ``mirror`` marks the repository as a
        mirror in the same transaction that creates it.
        """
        validate_repository_id(repo_id)
        validate_branch_name(default_branch)
        store = self.store_for(storage_id)
        storage_namespace = repository_namespace(storage_namespace)
        validate_namespace(store, storage_namespace)
        for existing in self.all_repositories():
            if existing.id == repo_id:
                raise RepositoryExistsError(f"repository {repo_id!r} already exists")
            if (existing.storage_id == storage_id
                    and namespaces_overlap(existing.storage_namespace, storage_namespace)):
                how = ("is already in use by" if namespaces_overlap(
                    storage_namespace, existing.storage_namespace, nested=False)
                       else f"overlaps {existing.storage_namespace!r}, the namespace of")
                raise RepositoryExistsError(
                    f"storage namespace {storage_namespace!r} {how} repository {existing.id!r}")
        now = self._now()
        repo = Repository(id=repo_id, storage_namespace=storage_namespace,
                          default_branch=default_branch, creation_date=now,
                          storage_id=storage_id, read_only=read_only)
        commit_id = ""
        first: tuple[str, Commit] | None = None
        if initial_commit:
            # the empty metarange is written first: this also proves the namespace is writable
            mr = self.ranges_for(repo).empty_metarange()
            commit = Commit(parents=(), metarange_id=mr, message=INITIAL_COMMIT_MESSAGE,
                            committer="", creation_date=now, metadata={}, generation=1)
            commit_id = commit_id_of(commit)
            first = (commit_id, commit)
        self.refstore.create_repository(
            repo, Branch(name=default_branch, commit_id=commit_id, staging_token=new_token()),
            mirror, first)
        return repo

    def orphaned_repositories(self) -> list[Repository]:
        """Repositories whose storage id names no configured blockstore (a store removed
        from the configuration, or a multi-store repository on a single-store server)."""
        orphaned = []
        for repo in self.all_repositories():
            try:
                self.store_for(repo.storage_id)
            except StorageNotFoundError:
                orphaned.append(repo)
        return orphaned

    def all_repositories(self) -> Iterator[Repository]:
        """Every repository, by id, read a page at a time."""
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

    # --------------------------------------------------------- branch protection
    def set_branch_protection_rules(self, repo_id: str, patterns: Sequence[str]) -> None:
        self._writable_repo(repo_id)
        for p in patterns:
            if not isinstance(p, str) or not p:
                raise ValidationError("branch protection pattern must be a non-empty string")
        self.refstore.set_branch_protection_rules(repo_id, patterns)

    def add_branch_protection_rule(self, repo_id: str, pattern: str) -> None:
        """Protect the branches matching ``pattern`` (lakeFS's ``createBranchProtectionRule``).

        Raises:
            BranchProtectionRuleExistsError: the repository has that pattern already.
        """
        patterns = self.get_branch_protection_rules(repo_id)
        if pattern in patterns:
            raise BranchProtectionRuleExistsError()
        self.set_branch_protection_rules(repo_id, [*patterns, pattern])

    def delete_branch_protection_rule(self, repo_id: str, pattern: str) -> None:
        """Stop protecting the branches matching ``pattern`` (and no other pattern).

        Raises:
            BranchProtectionRuleNotFoundError: the repository has no such pattern.
        """
        patterns = self.get_branch_protection_rules(repo_id)
        if pattern not in patterns:
            raise BranchProtectionRuleNotFoundError()
        self.set_branch_protection_rules(repo_id, [p for p in patterns if p != pattern])

    def is_protected(self, repo_id: str, branch: str) -> bool:
        return any(fnmatch.fnmatchcase(branch, p)
                   for p in self.get_branch_protection_rules(repo_id))

    # ----------------------------------------------------------------- branches
    def create_branch(self, repo_id: str, name: str, source_ref: str, *,
                      hidden: bool = False, expires_at: int | None = None,
                      user: str = "") -> Branch:
        """Create a branch at ``source_ref``.

        A ``hidden`` one is left out of default listings; one with ``expires_at`` (unix
        seconds) is deleted by the branch housekeeping once that time has passed.
        """
        repo = self._writable_repo(repo_id)
        validate_branch_name(name)
        if expires_at is not None and expires_at <= 0:
            raise ValidationError("expires_at must be a positive unix time in seconds")
        resolved = self.resolve_ref(repo_id, source_ref)
        # in a (detached) former mirror, never at a commit that cannot be read
        self.visibility.check_servable(repo, resolved.commit_id)
        try:  # an existing branch fails before the hooks run, as it would after
            self.refstore.get_branch(repo_id, name)
        except BranchNotFoundError:
            pass
        else:
            raise BranchExistsError(f"branch {name!r} already exists")
        run_id = self.hooks.pre(HookRecord(
            EventType.PRE_CREATE_BRANCH, repo, source_ref=resolved.commit_id,
            branch_id=name, commit_id=resolved.commit_id, acting_user=user))
        branch = Branch(name=name, commit_id=resolved.commit_id, staging_token=new_token())
        self.refstore.create_branch(repo_id, branch)
        if hidden:
            self.refstore.set_branch_hidden(repo_id, name, True)
        if expires_at is not None:
            self.refstore.set_branch_expiry(repo_id, name, expires_at)
        self._notify(repo_id, name)
        self.hooks.post(HookRecord(
            EventType.POST_CREATE_BRANCH, repo, source_ref=name, branch_id=name,
            commit_id=resolved.commit_id, acting_user=user), run_id)
        return branch

    def is_branch_hidden(self, repo_id: str, name: str) -> bool:
        return self.refstore.is_branch_hidden(repo_id, name)

    def get_branch_expiry(self, repo_id: str, name: str) -> int | None:
        """When an ephemeral branch expires (unix seconds); None for other branches."""
        return self.refstore.get_branch_expiry(repo_id, name)

    def get_branch(self, repo_id: str, name: str) -> Branch:
        self.refstore.get_repository(repo_id)
        return self.refstore.get_branch(repo_id, name)

    def list_branches(self, repo_id: str, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Branch]:
        self.refstore.get_repository(repo_id)
        return self.refstore.list_branches(repo_id, prefix=prefix, after=after, amount=amount)

    def delete_branch(self, repo_id: str, name: str, *, user: str = "") -> None:
        repo = self._writable_repo(repo_id)
        if name == repo.default_branch:
            raise CannotDeleteDefaultBranchError(f"cannot delete the default branch {name!r}")
        if self.is_protected(repo_id, name):
            raise ProtectedBranchError(f"cannot delete protected branch {name!r}")
        branch = self.refstore.get_branch(repo_id, name)
        run_id = self.hooks.pre(HookRecord(
            EventType.PRE_DELETE_BRANCH, repo, source_ref=name, branch_id=name,
            acting_user=user))
        self.refstore.delete_branch(repo_id, name)
        for token in (branch.staging_token, *branch.sealed_tokens):
            self.refstore.drop_staging(repo_id, token)
        self._notify(repo_id, name)
        self.hooks.post(HookRecord(
            EventType.POST_DELETE_BRANCH, repo, source_ref=branch.commit_id, branch_id=name,
            acting_user=user), run_id)

    # -------------------------------------------------------------------- tags
    def create_tag(self, repo_id: str, name: str, ref: str, *, user: str = "") -> Tag:
        repo = self._writable_repo(repo_id)
        validate_tag_name(name)
        tag = Tag(name=name, commit_id=self.resolve_ref(repo_id, ref).commit_id)
        self.visibility.check_servable(repo, tag.commit_id)
        record = HookRecord(EventType.PRE_CREATE_TAG, repo, source_ref=tag.commit_id,
                            tag_id=name, commit_id=tag.commit_id, acting_user=user)
        run_id = self.hooks.pre(record)
        self.refstore.create_tag(repo_id, tag)
        self._notify(repo_id, name)
        self.hooks.post(replace(record, event_type=EventType.POST_CREATE_TAG), run_id)
        return tag

    def get_tag(self, repo_id: str, name: str) -> Tag:
        self.refstore.get_repository(repo_id)
        return self.refstore.get_tag(repo_id, name)

    def list_tags(self, repo_id: str, prefix: str = "", after: str = "",
                  amount: int = 1000) -> list[Tag]:
        self.refstore.get_repository(repo_id)
        return self.refstore.list_tags(repo_id, prefix=prefix, after=after, amount=amount)

    def delete_tag(self, repo_id: str, name: str, *, user: str = "") -> None:
        repo = self._writable_repo(repo_id)
        tag = self.refstore.get_tag(repo_id, name)
        record = HookRecord(EventType.PRE_DELETE_TAG, repo, source_ref=tag.commit_id,
                            tag_id=name, commit_id=tag.commit_id, acting_user=user)
        run_id = self.hooks.pre(record)
        self.refstore.delete_tag(repo_id, name)
        self._notify(repo_id, name)
        self.hooks.post(replace(record, event_type=EventType.POST_DELETE_TAG), run_id)


__all__ = [
    "INITIAL_COMMIT_MESSAGE",
    "Graveler",
    "ListingItem",
    "MergeStrategy",
    "RefType",
    "ResolvedRef",
    "merge_sorted_records",
]
