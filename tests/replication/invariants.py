"""Checks of the mirroring invariants I1-I4 (docs/ARCHITECTURE.md, "Invariants"), run continuously.

The checker polls the source and the mirror; every mirror head it sees must be a
commit the source branch pointed at (or a first-parent ancestor of one: I1), fully
readable on the mirror with byte-identical data (I2), a descendant of the previous
mirror head unless the source branch was reset or deleted (I3).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from lakefs_core.catalog import Catalog
from lakefs_core.errors import NotFoundError
from lakefs_core.graveler.graveler import Graveler


@dataclass
class MirrorChecker:
    source: Graveler
    source_repo: str
    mirror: Graveler
    mirror_repo: str
    #: every head each source branch was seen at (by this checker or told by the test)
    source_heads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    mirror_heads: dict[str, str] = field(default_factory=dict)
    #: branches whose source was reset/deleted: their next mirror move may go backwards
    resets: set[str] = field(default_factory=set)
    verified: set[str] = field(default_factory=set)
    checks: int = 0

    def observe_source(self) -> None:
        for b in self.source.list_branches(self.source_repo):
            self.source_heads[b.name].add(b.commit_id)

    def source_moved(self, branch: str, commit_id: str, *, reset: bool = False) -> None:
        """Tell the checker of a source head (the test made the move)."""
        self.source_heads[branch].add(commit_id)
        if reset:
            self.resets.add(branch)

    def _first_parent_closure(self, heads: set[str]) -> set[str]:
        out: set[str] = set()
        for head in heads:
            cid: str | None = head
            while cid and cid not in out:
                out.add(cid)
                parents = self.source.get_commit(self.source_repo, cid).commit.parents
                cid = parents[0] if parents else None
        return out

    def check(self) -> None:
        self.checks += 1
        self.observe_source()
        try:
            branches = self.mirror.list_branches(self.mirror_repo)
        except NotFoundError:
            return  # mirror repository not created yet
        for b in branches:
            if not b.commit_id:
                continue
            # I1: a commit the source branch pointed at, or a first-parent ancestor
            allowed = self._first_parent_closure(self.source_heads[b.name])
            assert b.commit_id in allowed, (
                f"I1: mirror {b.name} at {b.commit_id}, never a source head of it")
            # I3: forward only, unless the source was reset
            prev = self.mirror_heads.get(b.name)
            if prev and prev != b.commit_id and b.name not in self.resets:
                assert self.source.is_ancestor(self.source_repo, prev, b.commit_id), (
                    f"I3: mirror {b.name} moved from {prev} to non-descendant {b.commit_id}")
            if prev != b.commit_id:
                self.resets.discard(b.name)
            self.mirror_heads[b.name] = b.commit_id
            # I2: everything readable, byte-identical
            self.verify_commit(b.commit_id)

    def verify_commit(self, commit_id: str) -> None:
        if commit_id in self.verified:
            return
        src_cat, dst_cat = Catalog(self.source), Catalog(self.mirror)
        src = [(r.path, r.entry) for r in self.source.iterate_entries(self.source_repo,
                                                                       commit_id)]
        dst = [(r.path, r.entry) for r in self.mirror.iterate_entries(self.mirror_repo,
                                                                       commit_id)]
        assert [p for p, _ in src] == [p for p, _ in dst], f"I2: listings differ at {commit_id}"
        for path, _entry in dst:
            a = src_cat.read(self.source_repo, commit_id, path)
            b = dst_cat.read(self.mirror_repo, commit_id, path)
            assert a == b, f"I2: {path} differs at {commit_id}"
        self.verified.add(commit_id)
