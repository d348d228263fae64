"""Source-side operations of the scenarios and the chaos run, each reported to the checker.

Every operation goes through the source region's REST API and, once it succeeded,
tells the :class:`~e2e.invariants.ApiMirrorChecker` where the branch now points (and
whether that was a reset), so the checker knows every head the mirror may show. The
driver keeps what it did too: every commit the source acknowledged, and where each of
its branches and tags points since, which is what a switchover or failback must not
lose (I7).
Object contents come from the driver's random generator: the same seed writes the
same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from e2e.api import ApiError, RegionClient
from e2e.invariants import ApiMirrorChecker


class MoveObserver(Protocol):
    """What a driver tells of its moves besides its checker: the checkers of more
    mirrors of the repository (in other regions), a group's source timeline."""

    def source_moved(self, branch: str, commit_id: str | None, *,
                     reset: bool = False) -> None: ...

    def observe_source(self) -> bool: ...

#: paths a commit writes are drawn from this many, so later commits overwrite earlier ones
PATHS = 24


@dataclass
class SourceDriver:
    """Makes changes to one source repository and keeps the checker informed.

    Args:
        client: client of the source region.
        repo: the source repository.
        checker: told of every move (optional).
        rng: where contents and choices come from.
        observers: told of every move too (the checkers of the repository's other
            mirrors, a group's source timeline).
    """

    client: RegionClient
    repo: str
    checker: ApiMirrorChecker | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    commits: int = 0
    #: commit id -> the branch, of every commit the source acknowledged (201) to us
    acknowledged: dict[str, str] = field(default_factory=dict)
    #: branch -> head, as our own operations left them
    heads: dict[str, str] = field(default_factory=dict)
    #: tag -> commit, as our own operations left them
    tags: dict[str, str] = field(default_factory=dict)
    observers: list[MoveObserver] = field(default_factory=list)

    def _told(self) -> list[MoveObserver]:
        return [*([] if self.checker is None else [self.checker]), *self.observers]

    def _moved(self, branch: str, head: str | None, *, reset: bool = False) -> None:
        if head is None:
            self.heads.pop(branch, None)
        else:
            self.heads[branch] = head
        for observer in self._told():
            observer.source_moved(branch, head, reset=reset)

    def adopt(self, heads: dict[str, str], tags: dict[str, str]) -> None:
        """Start from a repository's refs as they are (one that just became primary)."""
        self.heads, self.tags = {}, dict(tags)
        for branch, head in heads.items():
            self._moved(branch, head)

    def mirror_to(self, destination: RegionClient, name: str, region: str, namespace: str,
                  **checking: Any) -> tuple[ApiMirrorChecker, str]:
        """Create a mirror of the repository in ``region`` and a checker of it, told of
        every move from now on (the driver's checker if it has none, else an observer).

        Args:
            destination: client of ``region``.
            name: the mirror repository's name there.
            namespace: its storage namespace there.
            **checking: passed to the checker (``collect``, ``violations``, ``stats``).

        Returns:
            The checker and the mirror's id.
        """
        checker = ApiMirrorChecker(self.client, self.repo, destination, name, **checking)
        if self.checker is not None:  # another mirror's: the source is read once for both
            checker.share_source(self.checker)
        for branch, head in self.heads.items():
            checker.source_moved(branch, head)
        if self.checker is None:
            self.checker = checker
        else:
            self.observers.append(checker)
        created = self.client.create_mirror(self.repo, name, region, namespace)
        return checker, str(created["id"])

    def create_repository(self, namespace: str, default_branch: str = "main") -> None:
        self.client.create_repository(self.repo, namespace, default_branch)
        self._moved(default_branch, self.client.branches(self.repo)[default_branch])

    def write_commit(self, branch: str, *, files: int = 3, delete: bool = True,
                     message: str | None = None) -> str:
        """Upload ``files`` objects (and maybe delete one), commit; returns the commit id."""
        self.commits += 1
        written: set[str] = set()
        for _ in range(files):
            path = f"data/part-{self.rng.randrange(PATHS):03d}.bin"
            size = self.rng.choice((0, 7, 100, 1000, 5000))
            body = f"{branch}#{self.commits}:".encode() + self.rng.randbytes(size)
            self.client.upload(self.repo, branch, path, body)
            written.add(path)
        if delete and self.rng.random() < 0.3:
            others = [s["path"] for s in self.client.list_objects(self.repo, branch)
                      if s["path"] not in written]
            if others:
                self.client.delete_object(self.repo, branch, self.rng.choice(others))
        head = self.client.commit(self.repo, branch, message or f"commit {self.commits} on "
                                                                f"{branch}")
        self.acknowledged[head] = branch
        self._moved(branch, head)
        return head

    def create_branch(self, name: str, source: str) -> str:
        self.client.create_branch(self.repo, name, source)
        head = self.client.branches(self.repo)[name]
        self._moved(name, head, reset=True)  # a new life of the name starts anywhere
        return head

    def delete_branch(self, name: str) -> None:
        self.client.delete_branch(self.repo, name)
        self._moved(name, None)

    def merge(self, source: str, destination: str) -> str | None:
        """Merge ``source`` into ``destination`` (source wins conflicts); None: no changes."""
        try:
            head = self.client.merge(self.repo, source, destination,
                                     f"merge {source} into {destination}", "source-wins")
        except ApiError as e:
            if e.status == 400 and "no changes" in e.message:
                return None
            raise
        self.acknowledged[head] = destination
        self._moved(destination, head)
        return head

    def reset(self, branch: str, ref: str) -> str:
        """Hard-reset ``branch`` to ``ref`` (usually backwards)."""
        self.client.hard_reset(self.repo, branch, ref)
        head = self.client.branches(self.repo)[branch]
        self._moved(branch, head, reset=True)
        return head

    def tag(self, name: str, ref: str) -> None:
        self.client.create_tag(self.repo, name, ref)
        self.tags[name] = self.client.tags(self.repo)[name]
        for observer in self._told():
            observer.observe_source()

    def delete_tag(self, name: str) -> None:
        self.client.delete_tag(self.repo, name)
        self.tags.pop(name, None)

    def branches(self) -> dict[str, str]:
        return self.client.branches(self.repo)
