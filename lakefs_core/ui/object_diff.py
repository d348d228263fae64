"""What changed in an object between two refs: its text side by side, or for a table
(CSV, Parquet) its columns, its row counts and the rows added and removed.

Bounded like the previews: text and CSV are compared on their first
:data:`TEXT_BYTES` on each side (the API's range read), at most :data:`TEXT_LINES`
lines; Parquet files are read whole up to ``preview.PARQUET_MAX_BYTES`` and decoded
only as far as ``preview.PARQUET_MAX_DECODED`` allows. Rows are compared whole (as
multisets, so a row moved is no change) on the first :data:`TABLE_ROWS` rows of each
side, and at most :data:`TABLE_CELLS` cells; the page shows at most
:data:`SAMPLE_ROWS` of the rows added and of those removed.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

import pyarrow as pa

from lakefs_core.ui import preview as previews

TEXT_BYTES = 1024 * 1024
TEXT_LINES = 20_000
#: unchanged lines shown around each change
CONTEXT_LINES = 3
TABLE_ROWS = 10_000
TABLE_CELLS = 500_000
SAMPLE_ROWS = 50

LineKind = Literal["same", "changed", "added", "removed", "gap"]


@dataclass(frozen=True)
class Version:
    """One side of the comparison: the object's bytes read (``b""`` when it is absent
    there) and its whole size."""

    exists: bool
    data: bytes = b""
    size: int = 0

    @property
    def truncated(self) -> bool:
        return len(self.data) < self.size


@dataclass(frozen=True)
class Line:
    """A row of the side-by-side view; a ``gap`` row stands for ``old_no`` unchanged lines."""

    kind: LineKind
    old_no: int | None = None
    old: str = ""
    new_no: int | None = None
    new: str = ""


@dataclass
class TextDiff:
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the texts compared are equal (the object's change is elsewhere: past the bound,
    #: or its metadata)
    same: bool = False


@dataclass
class Table:
    """One version of a table, as far as it was read."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[str, ...]]
    #: its row count, when known (a Parquet footer's, or a CSV read whole)
    total: int | None
    #: why no rows were read ("" if they were)
    refused: str = ""

    @property
    def complete(self) -> bool:
        return self.total is not None and len(self.rows) == self.total


@dataclass
class TableDiff:
    columns_added: list[str] = field(default_factory=list)
    columns_removed: list[str] = field(default_factory=list)
    #: (column, type before, type after)
    types_changed: list[tuple[str, str, str]] = field(default_factory=list)
    rows_before: str = ""
    rows_after: str = ""
    #: the columns rows were compared on (those both versions have)
    compared: list[str] = field(default_factory=list)
    added: list[list[str]] = field(default_factory=list)
    removed: list[list[str]] = field(default_factory=list)
    added_count: int = 0
    removed_count: int = 0
    notes: list[str] = field(default_factory=list)


# --- text ---------------------------------------------------------------------------
def is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _lines(version: Version, side: str, notes: list[str]) -> list[str]:
    text = version.data.decode("utf-8", errors="replace")
    if version.truncated:  # a line, or a multi-byte character, may be cut at the end
        text = text[:text.rfind("\n") + 1] if "\n" in text else text.rstrip("\ufffd")
        notes.append(f"the {side} version is compared on its first {len(version.data):,} "
                     f"of {version.size:,} bytes")
    lines = text.splitlines()
    if len(lines) > TEXT_LINES:
        notes.append(f"the {side} version is compared on its first {TEXT_LINES:,} lines")
        lines = lines[:TEXT_LINES]
    return lines


def text_diff(old: Version, new: Version) -> TextDiff:
    """The two versions' lines side by side: each change with :data:`CONTEXT_LINES`
    unchanged lines around it, the other unchanged lines as gaps."""
    notes: list[str] = []
    a, b = _lines(old, "old", notes), _lines(new, "new", notes)
    if a == b:
        return TextDiff(notes=notes, same=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=True)
    rows: list[Line] = []
    shown = 0  # old lines before this point are shown or counted in a gap
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        if group[0][1] > shown:
            rows.append(Line("gap", old_no=group[0][1] - shown))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows.extend(Line("same", i + 1, a[i], j + 1, b[j])
                            for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
                continue
            for i, j in zip_longest(range(i1, i2), range(j1, j2)):
                kind: LineKind = ("changed" if i is not None and j is not None
                                  else "removed" if i is not None else "added")
                rows.append(Line(kind, None if i is None else i + 1, "" if i is None else a[i],
                                 None if j is None else j + 1, "" if j is None else b[j]))
        shown = group[-1][2]
    if shown < len(a):
        rows.append(Line("gap", old_no=len(a) - shown))
    return TextDiff(rows, notes)


# --- tables -------------------------------------------------------------------------
def csv_table(version: Version) -> Table:
    rows, complete = previews.csv_rows(version.data, version.truncated, TABLE_ROWS,
                                       TABLE_CELLS)
    header = rows[0] if rows else []
    body = [tuple(r) for r in rows[1:]]
    return Table(header, ["" for _ in header], body, len(body) if complete else None)


def parquet_table(version: Version) -> Table:
    """Raises ``pa.ArrowException`` or ``OSError`` for a file that is not Parquet."""
    read = previews.parquet_rows(version.data, TABLE_ROWS, TABLE_CELLS)
    rows = [tuple("" if v is None else str(v) for v in row) for row in read.rows]
    return Table(read.columns, read.types, rows, read.total, refused=read.refused)


def read_table(kind: Literal["csv", "parquet"], version: Version) -> Table | None:
    """``version`` as a table; None where the object is absent."""
    if not version.exists:
        return None
    if kind == "csv":
        return csv_table(version)
    if version.size > previews.PARQUET_MAX_BYTES:
        return Table([], [], [], None, refused=(
            f"{version.size:,} bytes, more than the {previews.PARQUET_MAX_BYTES:,} "
            "read to compare"))
    try:
        return parquet_table(version)
    except (pa.ArrowException, OSError) as e:
        return Table([], [], [], None, refused=f"not a readable Parquet file: {e}")


def _count(table: Table | None) -> str:
    if table is None:
        return "absent"
    if table.total is not None:
        return f"{table.total:,}"
    return f"at least {len(table.rows):,}"


def _shown(row: tuple[str, ...]) -> list[str]:
    return [previews.cell(v) for v in row]


def table_diff(old: Table | None, new: Table | None) -> TableDiff:
    """Columns added, removed or retyped; the row counts; the rows added and removed,
    compared whole on the columns both versions have."""
    before = old or Table([], [], [], 0)
    after = new or Table([], [], [], 0)
    result = TableDiff(rows_before=_count(old), rows_after=_count(new))
    for side, table in (("old", old), ("new", new)):
        if table is not None and table.refused:
            result.notes.append(f"the {side} version's rows are not compared: {table.refused}")
    if old is not None and new is not None:
        result.columns_added = [c for c in after.columns if c not in before.columns]
        result.columns_removed = [c for c in before.columns if c not in after.columns]
        old_types = dict(zip(before.columns, before.types, strict=True))
        result.types_changed = [(c, old_types[c], t) for c, t in
                                zip(after.columns, after.types, strict=True)
                                if c in old_types and old_types[c] != t]
        result.compared = [c for c in after.columns if c in before.columns]
    else:
        result.compared = after.columns if new is not None else before.columns
    if result.notes:
        return result
    if old is not None and new is not None and (result.columns_added
                                                 or result.columns_removed):
        result.notes.append(f"rows are compared on the {len(result.compared)} columns both "
                            "versions have")
    for side, table in (("old", old), ("new", new)):
        if table is not None and not table.complete:
            result.notes.append(f"only the first {len(table.rows):,} rows of the {side} "
                                "version are compared: rows past them count as neither "
                                "added nor removed, and a row moved past them shows as one")
    old_rows = _project(before, result.compared)
    new_rows = _project(after, result.compared)
    gone = Counter(old_rows) - Counter(new_rows)
    came = Counter(new_rows) - Counter(old_rows)
    result.removed_count, result.added_count = sum(gone.values()), sum(came.values())
    result.removed = _sample(old_rows, gone)
    result.added = _sample(new_rows, came)
    return result


def _project(table: Table, columns: list[str]) -> list[tuple[str, ...]]:
    if table.columns == columns:
        return table.rows
    where = [table.columns.index(c) for c in columns]
    return [tuple(row[i] if i < len(row) else "" for i in where) for row in table.rows]


def _sample(rows: list[tuple[str, ...]], wanted: Counter[tuple[str, ...]]) -> list[list[str]]:
    """The first :data:`SAMPLE_ROWS` rows of ``rows`` that ``wanted`` counts, in order."""
    left = Counter(wanted)
    out: list[list[str]] = []
    for row in rows:
        if len(out) >= SAMPLE_ROWS:
            break
        if left[row] > 0:
            left[row] -= 1
            out.append(_shown(row))
    return out
