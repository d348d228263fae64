"""DuckDB with the httpfs extension of the ``duckdb-extension-httpfs`` wheel: COPY to
Parquet and partitioned CSV, globbing, reads (ranged, by Parquet footers) and a read by
commit id.

Usage: python duckdb_httpfs.py ENDPOINT KEY SECRET REPO COMMIT_PHASE
COMMIT_PHASE is ``write`` (writes and reads ``main``) or a commit id to read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import duckdb_extension_httpfs


def connect(endpoint: str, key: str, secret: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    extension = (Path(duckdb_extension_httpfs.__file__).parent / "extensions"
                 / f"v{duckdb.__version__}" / "httpfs.duckdb_extension")
    con.execute(f"LOAD '{extension}'")
    con.execute(f"""CREATE SECRET lakefs (TYPE s3, KEY_ID '{key}', SECRET '{secret}',
                    ENDPOINT '{endpoint.removeprefix("http://")}', URL_STYLE 'path',
                    USE_SSL false, REGION 'us-east-1')""")
    return con


def main(endpoint: str, key: str, secret: str, repo: str, phase: str) -> None:
    con = connect(endpoint, key, secret)
    root = f"s3://{repo}"
    if phase == "write":
        # httpfs writes every file as a multipart upload
        con.execute(f"""COPY (SELECT i AS id, i % 5 AS bucket, 'row ' || i AS text
                              FROM range(1000000) t(i))
                        TO '{root}/main/duck/big.parquet' (FORMAT parquet)""")
        con.execute(f"""COPY (SELECT i AS id, i % 3 AS part FROM range(3000) t(i))
                        TO '{root}/main/duck/csv' (FORMAT csv, PARTITION_BY (part))""")
        total = con.execute(f"SELECT count(*), sum(id) FROM '{root}/main/duck/big.parquet'")
        assert total.fetchone() == (1_000_000, 499_999_500_000)
        files = con.execute(f"SELECT file FROM glob('{root}/main/duck/csv/*/*.csv')").fetchall()
        assert len(files) == 3, files
        parted = con.execute(f"""SELECT part, count(*) FROM read_csv('{root}/main/duck/csv/*/*.csv',
                                 hive_partitioning = true) GROUP BY part ORDER BY part""")
        assert parted.fetchall() == [(0, 1000), (1, 1000), (2, 1000)]
        one = con.execute(f"SELECT text FROM '{root}/main/duck/big.parquet' WHERE id = 777777")
        assert one.fetchone() == ("row 777777",)
    else:
        total = con.execute(f"SELECT count(*) FROM '{root}/{phase}/duck/big.parquet'")
        assert total.fetchone() == (1_000_000,)
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:6])
