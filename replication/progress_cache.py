"""The branch progress rows of the mirrors a sidecar looks at, kept in memory by the
mirrors table's change feed, so that neither a mirror's round nor the lag history reads
them from the table each time.

While the feed is open, a mirror's rows are read once (all mirrors' in one listing of
the organization's rows, a request per page) and then kept by the feed's branch events
and by the sidecar's own writes; the newest version of a row wins. Without the feed,
every read goes to the table. A write refused for its version (a row changed by someone
the feed has not told of yet) makes the mirror's rows be read again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from mirrors_db.models import ChangeEvent, MirrorBranch
from mirrors_db.table import MirrorsTable


class ProgressCache:
    """Per mirror id, its branch progress rows by branch."""

    def __init__(self, table: MirrorsTable, organization_id: str, page_size: int) -> None:
        self.table = table
        self.org = organization_id
        self.page_size = page_size
        self._rows: dict[str, dict[str, MirrorBranch]] = {}
        self._lock = threading.Lock()
        self._feed_open = False

    # ------------------------------------------------------------ the feed's state
    def feed_opened(self) -> None:
        with self._lock:
            self._feed_open = True

    def feed_closed(self) -> None:
        """Changes may be missed from now on: nothing kept is trusted any more."""
        with self._lock:
            self._feed_open = False
            self._rows.clear()

    @property
    def feed_open(self) -> bool:
        return self._feed_open

    # -------------------------------------------------------------------- reads
    def rows(self, mirror_id: str) -> list[MirrorBranch]:
        """The mirror's rows, by branch: as kept, read first if not kept yet (always
        read while the feed is closed)."""
        with self._lock:
            kept = self._rows.get(mirror_id) if self._feed_open else None
            if kept is not None:
                return sorted(kept.values(), key=lambda p: p.branch)
            if self._feed_open:
                # the feed's changes from now on land here too; the newest version wins
                kept = self._rows.setdefault(mirror_id, {})
        read = self.table.list_branch_progress(self.org, mirror_id)
        if kept is None:
            return read
        with self._lock:
            for p in read:
                self._keep(kept, p)
            return sorted(kept.values(), key=lambda p: p.branch)

    def unkept(self, mirror_ids: Iterable[str]) -> int:
        """How many of these mirrors' rows a read would fetch from the table."""
        with self._lock:
            if not self._feed_open:
                return sum(1 for _ in mirror_ids)
            return sum(1 for i in mirror_ids if i not in self._rows)

    def read_all(self, mirror_ids: list[str]) -> dict[str, list[MirrorBranch]]:
        """Read every row of these mirrors again, in one listing of the organization's
        rows (in case the feed missed a change; or while it is closed). Returns them,
        per mirror."""
        kept: dict[str, dict[str, MirrorBranch]] = {i: {} for i in mirror_ids}
        with self._lock:
            if self._feed_open:
                self._rows.update(kept)
        token: str | None = None
        while True:
            page = self.table.list_all_branch_progress(self.org, page_token=token,
                                                       page_size=self.page_size)
            with self._lock:
                for p in page.rows:
                    rows = kept.get(p.mirror_id)
                    if rows is not None:
                        self._keep(rows, p)
            if not page.next_page_token:
                break
            token = page.next_page_token
        with self._lock:
            return {i: sorted(rows.values(), key=lambda p: p.branch)
                    for i, rows in kept.items()}

    def keep_only(self, mirror_ids: set[str]) -> None:
        """Forget the rows of mirrors not in ``mirror_ids``."""
        with self._lock:
            for gone in set(self._rows) - mirror_ids:
                del self._rows[gone]

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    # ------------------------------------------------------------------ changes
    def changed(self, event: ChangeEvent) -> None:
        """A branch event of the feed."""
        mirror_id, branch = event.key[0], event.key[-1]
        with self._lock:
            rows = self._rows.get(mirror_id)
            if rows is None:
                return  # not kept: read whole when it is wanted
            if event.deleted:
                rows.pop(branch, None)
            elif isinstance(event.row, MirrorBranch):
                self._keep(rows, event.row)
            else:
                del self._rows[mirror_id]  # the change without its row: read again

    def stored(self, row: MirrorBranch) -> None:
        """The sidecar wrote ``row`` (the feed tells of it later)."""
        with self._lock:
            rows = self._rows.get(row.mirror_id)
            if rows is not None:
                self._keep(rows, row)

    def removed(self, mirror_id: str, branch: str) -> None:
        """The sidecar deleted the row."""
        with self._lock:
            rows = self._rows.get(mirror_id)
            if rows is not None:
                rows.pop(branch, None)

    def conflicted(self, mirror_id: str) -> None:
        """A write of the mirror's rows was refused: read them again when wanted."""
        with self._lock:
            self._rows.pop(mirror_id, None)

    @staticmethod
    def _keep(rows: dict[str, MirrorBranch], row: MirrorBranch) -> None:
        current = rows.get(row.branch)
        if current is None or row.version >= current.version:
            rows[row.branch] = row
