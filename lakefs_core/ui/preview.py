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


def csv_preview(data: bytes, truncated: bool) -> Preview:
    text = _decode(data, truncated)
    lines = text.splitlines()
    if truncated and lines:
        lines = lines[:-1]  # the last line may be cut
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(_sniff_sample(lines))
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(lines, dialect)
    rows = [row for _, row in zip(range(TABLE_ROWS + 1), reader, strict=False)]
    if not rows:
        return Preview("table", note="empty")
    more = truncated or len(lines) > len(rows)
    return Preview("table", columns=rows[0], rows=rows[1:],
                   note=f"the first {len(rows) - 1} rows" if more else "")


def _sniff_sample(lines: list[str]) -> str:
    """The first lines, at most :data:`SNIFF_CHARS` of them, ending at a line's end
    unless the first line alone is longer."""
    sample = "\n".join(lines[:20])
    if len(sample) <= SNIFF_CHARS:
        return sample
    cut = sample.rfind("\n", 0, SNIFF_CHARS)
    return sample[:cut if cut > 0 else SNIFF_CHARS]


def parquet_preview(data: bytes) -> Preview:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        meta = parquet.metadata
        groups, too_large = _leading_row_groups(meta)
        if not groups and too_large:
            return Preview("none", note=(
                f"too large to preview: its first row group decodes to {too_large:,} "
                f"bytes, more than the {PARQUET_MAX_DECODED:,} a preview decodes"))
        batch = next(parquet.iter_batches(batch_size=TABLE_ROWS, row_groups=groups), None)
    except (pa.ArrowException, OSError) as e:
        return Preview("text", text=f"not a readable Parquet file: {e}")
    columns = parquet.schema_arrow.names
    total = meta.num_rows
    if batch is None:
        return Preview("table", columns=columns, note="no rows")
    shown = [[_cell(v) for v in row.values()] for row in batch.to_pylist()]
    note = f"the first {len(shown)} of {total:,} rows" if total > len(shown) else ""
    return Preview("table", columns=columns, rows=shown, note=note)


def _leading_row_groups(meta: pq.FileMetaData) -> tuple[list[int], int]:
    """The first row groups, up to :data:`TABLE_ROWS` rows, that decode to at most
    :data:`PARQUET_MAX_DECODED` bytes together (by the sizes in the footer): their
    indexes, and the decoded size of the group that did not fit (0 when none)."""
    groups: list[int] = []
    decoded = rows = 0
    for i in range(meta.num_row_groups):
        if rows >= TABLE_ROWS:
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


def _cell(value: object) -> str:
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

