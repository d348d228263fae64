"""What the object page shows of an object: text, a table (CSV, Parquet), JSON, an image.

Only the first :data:`PREVIEW_BYTES` are read for text, CSV and JSON (the API's range
read); Parquet needs its footer, so it is previewed up to :data:`PARQUET_MAX_BYTES`.
A Parquet file's size says little of what it decodes to (a kilobyte of repeated
values can hold gigabytes), so its preview decodes only the row groups whose
uncompressed size, as its footer gives it, fits :data:`PARQUET_MAX_DECODED`.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

PREVIEW_BYTES = 256 * 1024
#: how much of a CSV the dialect is guessed from: the sniffer's patterns take time
#: quadratic in their input (a 250 KB line of quotes and commas takes minutes)
SNIFF_CHARS = 4096
PARQUET_MAX_BYTES = 64 * 1024 * 1024
PARQUET_MAX_DECODED = 64 * 1024 * 1024
TABLE_ROWS = 100
#: characters of a table cell shown; the rest is cut
CELL_CHARS = 1000

Kind = Literal["text", "table", "json", "image", "none"]

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp", ".svg": "image/svg+xml"}
TEXT_SUFFIXES = (".txt", ".md", ".log", ".yaml", ".yml", ".py", ".sql", ".xml", ".html",
                 ".ini", ".toml", ".cfg", ".sh", ".tsv")


@dataclass
class Preview:
    kind: Kind
    text: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    #: set when only part of the object is shown
    note: str = ""


def kind_of(path: str, content_type: str) -> Kind | Literal["csv", "parquet"]:
    """How an object is previewed, by its name, then its content type."""
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(".json") or lower.endswith(".jsonl") or content_type == "application/json":
        return "json"
    if any(lower.endswith(s) for s in IMAGE_TYPES) or content_type.startswith("image/"):
        return "image"
    if lower.endswith(TEXT_SUFFIXES) or content_type.startswith("text/"):
        return "text"
    return "none"


def image_type(path: str, content_type: str) -> str:
    """The media type to serve an image with (never one a browser would run as a page)."""
    for suffix, media in IMAGE_TYPES.items():
        if path.lower().endswith(suffix):
            return media
    return content_type if content_type.startswith("image/") else "application/octet-stream"


def _decode(data: bytes, truncated: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    if truncated:  # a multi-byte character may be cut at the end
        text = text.rstrip("\ufffd")
    return text


def text_preview(data: bytes, truncated: bool) -> Preview:
    note = f"the first {len(data):,} bytes" if truncated else ""
    return Preview("text", text=_decode(data, truncated), note=note)


def json_preview(data: bytes, truncated: bool) -> Preview:
    text = _decode(data, truncated)
    if not truncated:
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass  # JSON lines, or not JSON after all: shown as it is
    return Preview("json", text=text, note=f"the first {len(data):,} bytes" if truncated else "")


def csv_rows(data: bytes, truncated: bool, limit: int,
             cells: int | None = None) -> tuple[list[list[str]], bool]:
    """The header and at most ``limit`` rows (and ``cells`` cells) of a CSV's first
    bytes, and whether those are all of its rows (``truncated``: the bytes are only the
    object's first ones)."""
    text = _decode(data, truncated)
    lines = text.splitlines()
    if truncated and lines:
        lines = lines[:-1]  # the last line may be cut
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(_sniff_sample(lines))
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(lines, dialect)
    header = next(reader, None)
    if header is None:
        return [], not truncated
    limit = _within(limit, cells, len(header))
    rows = [header, *(row for _, row in zip(range(limit), reader, strict=False))]
    return rows, not truncated and next(reader, None) is None


def _within(limit: int, cells: int | None, columns: int) -> int:
    """``limit`` rows, fewer if more would hold over ``cells`` cells (never none)."""
    return limit if cells is None else max(1, min(limit, cells // max(1, columns)))


def csv_preview(data: bytes, truncated: bool) -> Preview:
    rows, complete = csv_rows(data, truncated, TABLE_ROWS)
    if not rows:
        return Preview("table", note="empty")
    return Preview("table", columns=rows[0], rows=rows[1:],
                   note="" if complete else f"the first {len(rows) - 1} rows")


def _sniff_sample(lines: list[str]) -> str:
    """The first lines, at most :data:`SNIFF_CHARS` of them, ending at a line's end
    unless the first line alone is longer."""
    sample = "\n".join(lines[:20])
    if len(sample) <= SNIFF_CHARS:
        return sample
    cut = sample.rfind("\n", 0, SNIFF_CHARS)
    return sample[:cut if cut > 0 else SNIFF_CHARS]


@dataclass
class ParquetRows:
    """The leading rows of a Parquet file, as far as the decoding bound allows."""

    columns: list[str]
    #: each column's Arrow type, as text
    types: list[str]
    rows: list[list[object]]
    #: the file's row count, by its footer
    total: int
    #: why no rows were decoded although the file has some ("" otherwise)
    refused: str = ""


def parquet_rows(data: bytes, limit: int, cells: int | None = None) -> ParquetRows:
    """At most ``limit`` leading rows (and ``cells`` cells) of the Parquet file ``data``,
    from the row groups that decode to at most :data:`PARQUET_MAX_DECODED` bytes
    together.

    Raises:
        pa.ArrowException, OSError: not a readable Parquet file.
    """
    parquet = pq.ParquetFile(pa.BufferReader(data))
    meta = parquet.metadata
    schema = parquet.schema_arrow
    columns, types = schema.names, [str(t) for t in schema.types]
    limit = _within(limit, cells, len(columns))
    groups, too_large = _leading_row_groups(meta, limit)
    if not groups and too_large:
        return ParquetRows(columns, types, [], meta.num_rows, refused=(
            f"its first row group decodes to {too_large:,} bytes, more than the "
            f"{PARQUET_MAX_DECODED:,} decoded here"))
    rows: list[list[object]] = []
    for batch in parquet.iter_batches(batch_size=min(limit, 10_000), row_groups=groups):
        rows.extend(list(row.values()) for row in batch.to_pylist()[:limit - len(rows)])
        if len(rows) >= limit:
            break
    return ParquetRows(columns, types, rows, meta.num_rows)


def parquet_preview(data: bytes) -> Preview:
    try:
        read = parquet_rows(data, TABLE_ROWS)
    except (pa.ArrowException, OSError) as e:
        return Preview("text", text=f"not a readable Parquet file: {e}")
    if read.refused:
        return Preview("none", note=f"too large to preview: {read.refused}")
    if not read.rows:
        return Preview("table", columns=read.columns, note="no rows")
    shown = [[cell(v) for v in row] for row in read.rows]
    note = f"the first {len(shown)} of {read.total:,} rows" if read.total > len(shown) else ""
    return Preview("table", columns=read.columns, rows=shown, note=note)


def _leading_row_groups(meta: pq.FileMetaData, limit: int) -> tuple[list[int], int]:
    """The first row groups, up to ``limit`` rows, that decode to at most
    :data:`PARQUET_MAX_DECODED` bytes together (by the sizes in the footer): their
    indexes, and the decoded size of the group that did not fit (0 when none)."""
    groups: list[int] = []
    decoded = rows = 0
    for i in range(meta.num_row_groups):
        if rows >= limit:
            break
        group = meta.row_group(i)
        size = max(group.total_byte_size, sum(
            group.column(j).total_uncompressed_size for j in range(group.num_columns)), 0)
        if decoded + size > PARQUET_MAX_DECODED:
            return groups, size
        groups.append(i)
        decoded += size
        rows += group.num_rows
    return groups, 0


def cell(value: object) -> str:
    if value is None:
        return ""
    text = str(value)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"


def preview(path: str, content_type: str, data: bytes, size: int) -> Preview:
    """The preview of ``data``: the object's first bytes (all of them for Parquet)."""
    truncated = len(data) < size
    kind = kind_of(path, content_type)
    if kind == "csv":
        return csv_preview(data, truncated)
    if kind == "parquet":
        return parquet_preview(data)
    if kind == "json":
        return json_preview(data, truncated)
    if kind == "text":
        return text_preview(data, truncated)
    return Preview(kind)

