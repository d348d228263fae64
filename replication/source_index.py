"""The mirrors and mirror groups whose source is this region, kept in memory from the
mirrors table's change feed: a commit's event is told to its mirrors' regions, and cuts
its groups, without a read of the table per commit.

While the feed is open the index is read whole once, then kept by the feed's mirror and
group events; without the feed it answers nothing (None), and the caller reads the
table as before. A row the feed has not brought yet (a mirror created a moment ago) is
missed at worst by one event; the mirror's first round, and the sensor, read its source
anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from mirrors_db.models import ChangeEvent, Mirror, MirrorGroup, MirrorState, RowKind
from mirrors_db.table import MirrorsTable

#: the states of a mirror whose source region tells it of moves
TOLD = frozenset({MirrorState.ACTIVE, MirrorState.CREATING})


class SourceIndex:
    """This region's mirrors (by source repository) and groups, as the feed tells."""

    def __init__(self, table: MirrorsTable, organization_id: str, region: str,
                 page_size: int) -> None:
        self.table = table
        self.org = organization_id
        self.region = region
        self.page_size = page_size
        self._lock = threading.Lock()
        self._loaded = False
        self._mirrors: dict[str, Mirror] = {}  # id -> mirror, told states only
        self._groups: dict[str, MirrorGroup] = {}

    def load(self) -> None:
        """Read the index whole (call once the feed is open, so nothing falls between)."""
        mirrors: dict[str, Mirror] = {}
        token: str | None = None
        while True:
            page = self.table.list_mirrors(self.org, page_token=token,
                                           page_size=self.page_size)
            mirrors.update((m.id, m) for m in page.mirrors if self._told(m))
            if not page.next_page_token:
                break
            token = page.next_page_token
        groups = {g.id: g for g in self.table.list_groups(self.org)
                  if g.source_region == self.region}
        with self._lock:
            # a row the feed brought during the read is newer than the read's
            for m in self._mirrors.values():
                if m.id not in mirrors or mirrors[m.id].version < m.version:
                    mirrors[m.id] = m
            self._mirrors = {i: m for i, m in mirrors.items() if self._told(m)}
            groups.update(self._groups)
            self._groups = groups
            self._loaded = True

    def forget(self) -> None:
        """The feed closed: answer nothing until the next :meth:`load`."""
        with self._lock:
            self._loaded = False
            self._mirrors.clear()
            self._groups.clear()

    def on_event(self, event: ChangeEvent) -> None:
        """Keep the index by one of the feed's events."""
        with self._lock:
            if event.kind is RowKind.MIRROR:
                mirror_id = event.key[0]
                if isinstance(event.row, Mirror) and not event.deleted:
                    current = self._mirrors.get(mirror_id)
                    if current is not None and current.version > event.row.version:
                        return
                    if self._told(event.row):
                        self._mirrors[mirror_id] = event.row
                        return
                elif not event.deleted:
                    self._loaded = False  # a change without its row: read whole again
                self._mirrors.pop(mirror_id, None)
            elif event.kind is RowKind.GROUP:
                group_id = event.key[0]
                if isinstance(event.row, MirrorGroup) and not event.deleted:
                    if event.row.source_region == self.region:
                        self._groups[group_id] = event.row
                elif not event.deleted:
                    self._loaded = False
                else:
                    self._groups.pop(group_id, None)

    def add(self, mirror: Mirror) -> None:
        """A mirror this sidecar just wrote: known at once, before the feed tells of it
        (its creator tells its destination region of it next)."""
        self.on_event(ChangeEvent(RowKind.MIRROR, mirror.organization_id, (mirror.id,),
                                  False, mirror))

    def add_group(self, group: MirrorGroup) -> None:
        """A group this sidecar just wrote: known at once, before the feed tells of it."""
        self.on_event(ChangeEvent(RowKind.GROUP, group.organization_id, (group.id,),
                                  False, group))

    @property
    def loaded(self) -> bool:
        return self._loaded

    def mirrors_of(self, repositories: Iterable[str]) -> list[Mirror] | None:
        """The told mirrors of these source repositories; None while not loaded."""
        wanted = set(repositories)
        with self._lock:
            if not self._loaded:
                return None
            return [m for m in self._mirrors.values() if m.source_repository in wanted]

    def groups(self) -> list[MirrorGroup] | None:
        """The groups whose source is this region; None while not loaded."""
        with self._lock:
            return list(self._groups.values()) if self._loaded else None

    def _told(self, mirror: Mirror) -> bool:
        return mirror.source_region == self.region and mirror.state in TOLD
