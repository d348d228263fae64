"""The engine's common ground: its stores, caches, and the checks every operation makes.

:class:`EngineCore` holds what every part of the engine shares (the refstore, the
range managers of each storage namespace, the commit cache, the listeners of ref
moves, which commits a repository may serve) and the checks before a write. The
operations build on it in layers: ref resolution and history
(:mod:`~lakefs_core.graveler.resolution`), staging and objects
(:mod:`~lakefs_core.graveler.staging`), commit and merge
(:mod:`~lakefs_core.graveler.committing`), and :class:`~lakefs_core.graveler.graveler.Graveler`.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from cachetools import LRUCache
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
    CommitNotFoundError,
    ProtectedBranchError,
    ReadOnlyRepositoryError,
)
from lakefs_core.graveler.hooks import HookHandler, NoHooks
from lakefs_core.graveler.model import (
    Branch,
    Commit,
    CommitRecord,
    MirrorMarking,
    Repository,
)
from lakefs_core.graveler.ranges import DEFAULT_RANGE_CACHE_BYTES, RangeCache, RangeManager
from lakefs_core.graveler.visibility import MirrorVisibility
from lakefs_core.refstore.base import RefStore

log = logging.getLogger("lakefs_core.graveler")

INITIAL_COMMIT_MESSAGE = "Repository created"


def new_token() -> str:
    """A fresh staging token."""
    return uuid.uuid4().hex


_T = TypeVar("_T")


def all_pages(fetch: Callable[[str, int], Sequence[_T]], key: Callable[[_T], str],
              page_size: int = 1000) -> Iterator[_T]:
    """Every item of a listing read page by page: ``fetch(after, amount)``, sorted by ``key``."""
    after = ""
    while True:
        page = fetch(after, page_size)
        yield from page
        if len(page) < page_size:
            return
        after = key(page[-1])


def all_branches(refstore: RefStore, repo_id: str) -> Iterator[Branch]:
    """Every branch of a repository, by name."""
    return all_pages(lambda after, n: refstore.list_branches(repo_id, after=after, amount=n),
                     lambda b: b.name)


def all_commits(refstore: RefStore, repo_id: str) -> Iterator[CommitRecord]:
    """Every commit record of a repository, by id."""
    return all_pages(lambda after, n: refstore.list_commits(repo_id, after=after, amount=n),
                     lambda c: c.id)


class EngineCore:
    """The versioning engine over a refstore and one or more blockstores.

    Args:
        refstore: where rows live.
        store_for: returns the blockstore of a storage id ("" = the default store).
        clock: seconds since the epoch (tests may freeze it).
        range_options: keyword arguments for every :class:`RangeManager`;
            ``cache_size`` (ranges) and ``cache_size_bytes`` (memory) bound the one
            range cache they share.
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
        self._lock = threading.Lock()
        self._ranges: LRUCache[tuple[str, str], RangeManager] = LRUCache(256)
        #: one bound on the parsed ranges in memory, whatever the number of repositories
        self._range_cache = RangeCache(
            self.range_options.pop("cache_size", 256),
            self.range_options.pop("cache_size_bytes", DEFAULT_RANGE_CACHE_BYTES))
        #: called with (repository, ref name) after a branch or tag moves; must not block
        self.ref_listeners: list[Callable[[str, str], None]] = []
        #: runs the hooks of operations (the server's: the repository's actions)
        self.hooks: HookHandler = NoHooks()
        # commit records are immutable: the same id always names the same record
        self._commits: LRUCache[tuple[str, str], Commit] = LRUCache(50_000)
        #: which commits a repository may serve (mirrors: only those proven present)
        self.visibility = MirrorVisibility(refstore)

    # ------------------------------------------------------------------ plumbing
    def ranges_for(self, repo: Repository) -> RangeManager:
        """The range manager of a repository's storage namespace (cached)."""
        key = (repo.storage_id, repo.storage_namespace)
        with self._lock:
            rm = self._ranges.get(key)
            if rm is None:
                rm = RangeManager(self.store_for(repo.storage_id), repo.storage_namespace,
                                  cache=self._range_cache, **self.range_options)
                self._ranges[key] = rm
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

    # ------------------------------------------------------------ write checks
    def _writable_repo(self, repo_id: str) -> Repository:
        repo = self.refstore.get_repository(repo_id)
        _refuse_read_only(repo)
        return repo

    def writable_repository(self, repo_id: str) -> Repository:
        """The repository, if it may be written (a mirror may not).

        Raises:
            RepositoryNotFoundError, ReadOnlyRepositoryError.
        """
        return self._writable_repo(repo_id)

    def get_branch_protection_rules(self, repo_id: str) -> list[str]:
        """Branch name patterns (fnmatch style, e.g. ``main``, ``release-*``)."""
        self.refstore.get_repository(repo_id)
        return list(self.refstore.get_branch_protection_rules(repo_id))

    def _check_direct_write(self, repo_id: str, branch: str, *,
                            commit: bool = False) -> Repository:
        """The repository, if ``branch`` may be written (``commit``: committed to) directly.

        Raises:
            ReadOnlyRepositoryError, ProtectedBranchError.
        """
        repo = self._writable_repo(repo_id)
        rules = self.refstore.get_branch_protection_rules(repo_id)
        if commit and _matches(branch, rules):
            raise ProtectedBranchError("cannot commit to protected branch")  # lakeFS's words
        _refuse_protected(branch, rules)
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

    # --------------------------------------------------------- commits, mirrors
    def get_commit(self, repo_id: str, commit_id: str) -> CommitRecord:
        """Raises CommitNotFoundError."""
        key = (repo_id, commit_id)
        with self._lock:
            commit = self._commits.get(key)
        if commit is None:
            try:
                commit = self.refstore.get_commit(repo_id, commit_id)
            except CommitNotFoundError:
                raise CommitNotFoundError(f"commit {commit_id!r} not found") from None
            with self._lock:
                self._commits[key] = commit
        return CommitRecord(commit_id, commit)

    def mirror_marking(self, repo_id: str) -> MirrorMarking | None:
        """What makes the repository a mirror; None for other repositories."""
        return self.refstore.get_mirror_marking(repo_id)

    def put_commit_record(self, repo_id: str, rec: CommitRecord) -> None:
        """Store a commit record made or restored here (not a mirror's replicated one)."""
        self._put_local_commit(repo_id, rec.id, rec.commit)

    def notify_ref_moved(self, repo_id: str, ref: str) -> None:
        """Tell the ref listeners that a branch or tag was set outside the usual operations."""
        self._notify(repo_id, ref)

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


def _refuse_read_only(repo: Repository) -> None:
    if repo.read_only:
        raise ReadOnlyRepositoryError(f"repository {repo.id!r} is read-only")


def _matches(branch: str, rules: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(branch, p) for p in rules)


def _refuse_protected(branch: str, rules: Sequence[str]) -> None:
    """Raise ProtectedBranchError if a protection pattern of ``rules`` matches ``branch``."""
    if _matches(branch, rules):
        raise ProtectedBranchError(f"cannot write to protected branch {branch!r}")
