"""Reading data files with pyarrow: Parquet, CSV and JSON lines, by physical address.

Files on a local blockstore are memory-mapped where they lie; files elsewhere are
fetched whole (one GET) and parsed from memory. Every batch is cast to the Arrow
schema Spark expects, so batches go to the JVM without conversion in Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from lakefs_core.block.base import BlockStore
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import StorageError, ValidationError
from lakefs_core.spark.options import option_bool, option_int, option_str

#: rows per Arrow batch handed to Spark (Parquet reads also respect row groups)
DEFAULT_BATCH_ROWS = 65_536


class FileFormat(StrEnum):
    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


@dataclass(frozen=True)
class FormatOptions:
    """How to parse the files.

    Attributes:
        format: parquet (default), csv or json (one object per line).
        header: CSV files start with a header line (default true).
        delimiter: the CSV field delimiter (default ``,``).
        batch_rows: rows per Arrow batch.
    """

    format: FileFormat = FileFormat.PARQUET
    header: bool = True
    delimiter: str = ","
    batch_rows: int = DEFAULT_BATCH_ROWS

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> FormatOptions:
        """Raises: ValidationError (an unknown format or a bad value)."""
        name = (option_str(options, "format", "parquet") or "parquet").lower()
        try:
            fmt = FileFormat(name)
        except ValueError:
            raise ValidationError(
                f"option 'format' must be one of {[f.value for f in FileFormat]}, not {name!r}"
            ) from None
        delimiter = option_str(options, "delimiter") or option_str(options, "sep") or ","
        if len(delimiter) != 1:
            raise ValidationError(f"option 'delimiter' must be one character, not {delimiter!r}")
        return cls(fmt, option_bool(options, "header", True), delimiter,
                   option_int(options, "batch_rows", DEFAULT_BATCH_ROWS))


def open_input(store: BlockStore, address: str) -> pa.NativeFile:
    """A random-access Arrow file over an object.

    Raises:
        ObjectNotFoundError: nothing at ``address``.
    """
    if isinstance(store, LocalBlockStore) and address.startswith("local://"):
        parts = [p for p in address[len("local://"):].split("/") if p]
        if parts and not any(p in (".", "..") for p in parts):
            path = os.path.join(store.root, *parts)
            if os.path.isfile(path):
                return pa.memory_map(path, "r")
    return pa.BufferReader(store.get(address))


def _csv_read_options(opts: FormatOptions, column_names: list[str] | None = None
                      ) -> pacsv.ReadOptions:
    if opts.header:
        return pacsv.ReadOptions(block_size=8 << 20)
    return pacsv.ReadOptions(block_size=8 << 20, column_names=column_names,
                             autogenerate_column_names=column_names is None)


def infer_schema(source: pa.NativeFile, opts: FormatOptions) -> pa.Schema:
    """The Arrow schema of one file (Parquet: its footer; CSV/JSON: inferred from data).

    Raises:
        StorageError: the file cannot be parsed in this format.
    """
    try:
        if opts.format is FileFormat.PARQUET:
            return pq.ParquetFile(source).schema_arrow
        if opts.format is FileFormat.CSV:
            return pacsv.read_csv(source, read_options=_csv_read_options(opts),
                                  parse_options=pacsv.ParseOptions(delimiter=opts.delimiter)
                                  ).schema
        return pajson.read_json(source).schema
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read a {opts.format.value} schema: {e}") from e


def read_batches(source: pa.NativeFile, opts: FormatOptions, target: pa.Schema
                 ) -> Iterator[pa.RecordBatch]:
    """The file's rows as batches of exactly the ``target`` schema.

    Columns the file lacks are null; columns it has beyond the target are dropped.

    Raises:
        StorageError: the file cannot be parsed, or a column cannot be cast.
    """
    try:
        if opts.format is FileFormat.PARQUET:
            pf = pq.ParquetFile(source)
            present = set(pf.schema_arrow.names)
            columns = [f.name for f in target if f.name in present]
            batches: Iterator[pa.RecordBatch] = pf.iter_batches(
                batch_size=opts.batch_rows, columns=columns, use_threads=False)
        elif opts.format is FileFormat.CSV:
            names = None if opts.header else [f.name for f in target]
            batches = iter(pacsv.open_csv(
                source, read_options=_csv_read_options(opts, names),
                parse_options=pacsv.ParseOptions(delimiter=opts.delimiter),
                convert_options=pacsv.ConvertOptions(
                    column_types={f.name: f.type for f in target})))
        else:
            table = pajson.read_json(source, parse_options=pajson.ParseOptions(
                explicit_schema=target, unexpected_field_behavior="ignore"))
            batches = iter(table.to_batches(max_chunksize=opts.batch_rows))
        for batch in batches:
            yield conform(batch, target)
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"cannot read {opts.format.value} data: {e}") from e


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the target's columns, in its order and types (missing ones null)."""
    if batch.schema.equals(target):
        return batch
    names = batch.schema.names
    arrays = []
    for f in target:
        if f.name in names:
            column = batch.column(names.index(f.name))
            if not column.type.equals(f.type):
                # Spark keeps microseconds: finer timestamps are truncated, as Spark does
                column = column.cast(f.type, safe=not pa.types.is_timestamp(f.type))
            arrays.append(column)
        else:
            arrays.append(pa.nulls(batch.num_rows, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
