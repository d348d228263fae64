"""``lakectl cat-sst -f <file>``: the rows of a range or metarange file.

lakeFS keeps ranges in SSTables; this server keeps them in Parquet (see the server's
``rangefile`` module: the footer's ``lakefs_type`` says ``range`` or ``metarange``),
so this reads those, with pyarrow, into lakeFS's table. A range has no identity
column here.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import click
import pyarrow as pa
import pyarrow.parquet as pq

from lakectl.output import Fatal, Output

RANGE_HEADERS = ("path", "size", "etag", "last_modified", "address", "metadata")
METARANGE_HEADERS = ("range_id", "min_key", "max_key", "count", "estimated_size")


@click.command("cat-sst", hidden=True)
@click.option("--amount", type=int, default=-1, show_default=True,
              help="how many records to return, or -1 for all records")
@click.option("-f", "--file", "path", required=True,
              help='path to an sstable file, or "-" for stdin')
def cat_sst(amount: int, path: str) -> None:
    """Explore lakeFS .sst files"""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise Fatal(f"open {path}: {e.strerror}") from None
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise Fatal(f"could not read {path}: {e}") from None
    kind = (table.schema.metadata or {}).get(b"lakefs_type", b"").decode(errors="replace")
    if not kind:
        raise Fatal("could not determine sstable file type")
    rows = table.to_pylist() if amount < 0 else table.slice(0, amount).to_pylist()
    if kind == "metarange":
        Output().table(METARANGE_HEADERS, [[r[h] for h in METARANGE_HEADERS] for r in rows])
    elif kind == "range":
        Output().table(RANGE_HEADERS, [[
            r["path"], r["size"], r["etag"],
            datetime.fromtimestamp(r["mtime"], UTC).strftime("%Y-%m-%d %H:%M:%S %z %Z"),
            r["address"], json.dumps(json.loads(r["metadata"] or "{}"), sort_keys=True)]
            for r in rows])
    else:
        raise Fatal(f"unknown sstable file type: {kind}")
