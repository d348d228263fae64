"""``python -m examples.quality_gate --port N --lakefs URL (--table P | --schema F)...``"""

from __future__ import annotations

import argparse
import logging
import os

import lakefs

from examples.quality_gate.gate import QualityGate, TableSchemas
from examples.quality_gate.server import make_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m examples.quality_gate",
        description="A lakeFS pre-merge webhook that checks the Parquet schema of a merge.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--lakefs", required=True, help="lakeFS endpoint, e.g. http://127.0.0.1:8000")
    parser.add_argument("--schema", help="JSON file: {table prefix: {column: arrow type}}")
    parser.add_argument("--table", action="append", default=[],
                        help="a table prefix whose schema is that of its files on the "
                             "destination branch (repeatable)")
    args = parser.parse_args(argv)
    try:
        schemas = TableSchemas.load(args.schema, args.table)
    except (OSError, ValueError) as e:
        parser.error(str(e))
    key = os.environ.get("LAKECTL_CREDENTIALS_ACCESS_KEY_ID")
    secret = os.environ.get("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY")
    if not key or not secret:
        parser.error("set LAKECTL_CREDENTIALS_ACCESS_KEY_ID and "
                     "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    client = lakefs.Client(host=args.lakefs, username=key, password=secret)
    httpd = make_server(QualityGate(client, schemas), args.host, args.port)
    logging.info("quality gate listening on http://%s:%d", *httpd.server_address[:2])
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
