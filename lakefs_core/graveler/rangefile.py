"""Range and metarange files: Parquet, with plain columns that Spark, DuckDB and pandas read.

A range file has one row per entry, sorted by ``path``:
``path, address, address_type, size, etag, mtime, content_type, metadata`` where
``metadata`` is the user metadata as a JSON object with sorted keys. A metarange
file has one row per range: ``range_id, min_key, max_key, count, estimated_size``.
The file-level key-value metadata ``lakefs_type`` says which of the two a file is.

A range is handled either as records (:func:`encode_range`, :func:`decode_range`) or
as an Arrow table with exactly :data:`RANGE_SCHEMA` and one chunk per column
(:func:`range_table`, :func:`decode_range_table`, :func:`encode_range_table`): the
same records give the same table and the same file bytes either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefs_core.errors import StorageError, ValidationError
from lakefs_core.graveler.model import AddressType, Entry, EntryRecord, RangeInfo

RANGE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("address", pa.string(), nullable=False),
        pa.field("address_type", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("etag", pa.string(), nullable=False),
        pa.field("mtime", pa.float64(), nullable=False),
        pa.field("content_type", pa.string(), nullable=False),
        pa.field("metadata", pa.string(), nullable=False),
    ],
    metadata={"lakefs_type": "range"},
)

METARANGE_SCHEMA = pa.schema(
    [
        pa.field("range_id", pa.string(), nullable=False),
        pa.field("min_key", pa.string(), nullable=False),
        pa.field("max_key", pa.string(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("estimated_size", pa.int64(), nullable=False),
    ],
    metadata={"lakefs_type": "metarange"},
)

_ADDRESS_TYPES = {str(t): t for t in AddressType}


def whole(column: pa.ChunkedArray) -> pa.Array:
    """A column as one array: its only chunk as it is, or its chunks joined (copied)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _to_bytes(table: pa.Table) -> bytes:
    # into Arrow's own buffer: a Python file object would take the GIL for each of
    # the writer's calls (some 36 a range), which threads writing ranges contend for
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue().to_pybytes()


def _from_bytes(data: bytes, schema: pa.Schema, what: str) -> pa.Table:
    try:
        # one thread: the callers read ranges on threads of their own, and a process
        # that leaves Arrow's thread pool running may abort at exit on a tuned
        # allocator ("terminate called without an active exception")
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"corrupt {what} file: {e}") from e
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise StorageError(f"{what} file lacks columns {missing}")
    return table


def file_type(data: bytes) -> str | None:
    """What a metadata file is, ``range`` or ``metarange``, from its footer alone; None
    for a file that is neither."""
    try:
        footer = pq.read_metadata(pa.BufferReader(data)).metadata or {}
    except (pa.ArrowException, OSError):
        return None
    kind = footer.get(b"lakefs_type", b"").decode(errors="replace")
    return kind if kind in ("range", "metarange") else None


def _metadata_json(metadata: Mapping[str, str]) -> str:
    if not metadata:
        return "{}"
    return json.dumps(dict(metadata), sort_keys=True, separators=(",", ":"))


def range_table(records: Sequence[EntryRecord]) -> pa.Table:
    """The Arrow table of a range holding ``records`` (sorted, no tombstones)."""
    present: list[Entry] = []
    for r in records:
        if r.entry is None:
            raise ValidationError(f"a range cannot hold a tombstone: {r.path!r}")
        present.append(r.entry)
    columns = [
        [r.path for r in records],
        [e.address for e in present],
        [str(e.address_type) for e in present],
        [e.size for e in present],
        [e.etag for e in present],
        [float(e.mtime) for e in present],
        [e.content_type for e in present],
        [_metadata_json(e.metadata) for e in present],
    ]
    return pa.Table.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, RANGE_SCHEMA, strict=True)],
        schema=RANGE_SCHEMA,
    )


def encode_range(records: Sequence[EntryRecord]) -> bytes:
    """The Parquet bytes of a range holding ``records`` (sorted, no tombstones)."""
    return _to_bytes(range_table(records))


def encode_range_table(table: pa.Table) -> bytes:
    """The Parquet bytes of a range table (the columns of :data:`RANGE_SCHEMA`).

    The columns are made contiguous first: the bytes depend on the rows only, not on
    how the table was put together from slices of others.
    """
    return _to_bytes(pa.Table.from_arrays(
        [whole(table.column(f.name)) for f in RANGE_SCHEMA], schema=RANGE_SCHEMA))


def decode_range_table(data: bytes) -> pa.Table:
    """The Arrow table of a range file, checked: the columns of :data:`RANGE_SCHEMA`,
    no nulls, known address types.

    Raises:
        StorageError: the bytes are not a range file.
    """
    table = _from_bytes(data, RANGE_SCHEMA, "range")
    columns = []
    for f in RANGE_SCHEMA:
        column = table.column(f.name)
        if column.null_count:
            raise StorageError(f"corrupt range file: nulls in {f.name}")
        try:
            columns.append(whole(column.cast(f.type)))
        except (pa.ArrowException, ValueError) as e:
            raise StorageError(f"corrupt range file: column {f.name}: {e}") from None
    known = pc.is_in(columns[2], value_set=pa.array(list(_ADDRESS_TYPES), pa.string()))
    if not pc.all(known).as_py() and len(known):
        raise StorageError("corrupt range file: unknown address type")
    return pa.Table.from_arrays(columns, schema=RANGE_SCHEMA)


def records_of_table(table: pa.Table) -> list[EntryRecord]:
    """The records of a range table."""
    cols = [table.column(name).to_pylist() for name in RANGE_SCHEMA.names]
    try:
        cols[2] = [_ADDRESS_TYPES[t] for t in cols[2]]
        cols[7] = [{} if m == "{}" else json.loads(m) for m in cols[7]]
    except (KeyError, ValueError) as e:
        raise StorageError(f"corrupt range file: {e!r}") from None
    make_entry, make_record = Entry, EntryRecord
    return [
        make_record(path, make_entry(address, size, etag, mtime, address_type, content_type,
                                     metadata))
        for path, address, address_type, size, etag, mtime, content_type, metadata in zip(
            *cols, strict=True)
    ]


def decode_range(data: bytes) -> list[EntryRecord]:
    """The records of a range file.

    Raises:
        StorageError: the bytes are not a range file.
    """
    return records_of_table(decode_range_table(data))


def encode_metarange(ranges: Sequence[RangeInfo]) -> bytes:
    """The Parquet bytes of a metarange listing ``ranges``."""
    columns = [
        [r.id for r in ranges],
        [r.min_key for r in ranges],
        [r.max_key for r in ranges],
        [r.count for r in ranges],
        [r.estimated_size for r in ranges],
    ]
    return _to_bytes(pa.Table.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, METARANGE_SCHEMA, strict=True)],
        schema=METARANGE_SCHEMA,
    ))


def decode_metarange(data: bytes) -> tuple[RangeInfo, ...]:
    """The range descriptors of a metarange file.

    Raises:
        StorageError: the bytes are not a metarange file.
    """
    table = _from_bytes(data, METARANGE_SCHEMA, "metarange")
    cols = [table.column(name).to_pylist() for name in METARANGE_SCHEMA.names]
    return tuple(RangeInfo(*row) for row in zip(*cols, strict=True))
