"""Write the configuration references in ``docs/`` from the settings models.

``python -m lakefs_testing.config_reference`` rewrites ``docs/CONFIG_SERVER.md`` and
``docs/CONFIG_REPLICATION.md``; with ``--check`` it writes nothing and exits 1 when a
committed page differs from what the models give (the test suite runs the check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lakefs_core.config import ServerConfig
from lakefs_core.settings.reference import render_reference
from replication.config import ReplicationConfig

ROOT = Path(__file__).resolve().parents[1]

SERVER_INTRO = """
Every setting of the versioning server (`lakefs-core run`, `python -m lakefs_core run`).
The server reads an optional YAML file (`--config FILE`, or the file named by
`LAKEFS_CONFIG_FILE`), then the environment variables below, which win. A variable is
the key path joined with `_`, upper-cased, after `LAKEFS_`; a list, a map or a whole
section takes a JSON value. Durations are written `500ms`, `20s`, `1m`, `1h30m`, or as
a number of seconds. An unknown key (outside the blockstore sections, which accept and
ignore lakeFS options this server does not implement) or an invalid value stops the
server at startup with a message naming the key and where its value came from.

With no file and no variable at all the server runs embedded: SQLite metadata and a
local blockstore under `data_dir`. Examples: [config/](../config/README.md).
"""

REPLICATION_INTRO = """
Every setting of the replication service (`lakefs-replication run`,
`python -m replication run`). It reads an optional YAML file (the file named by
`REPLICATION_CONFIG_FILE`; the Helm chart renders `replication.config` into one), then
the environment variables below, which win: `REPLICATION_` and the key path, as for
the server. The replication user's keys and the encryption key can also come from
the un-prefixed names of the replication Kubernetes secret (listed second). When
`refstore_database` is absent, it is read from the server's settings in the same
environment (`LAKEFS_CONFIG_FILE` or `LAKEFS_DATABASE_*`).

What the settings do together (the validator's schedule, object replication, the
mirrors table): [REPLICATION_CONFIG.md](REPLICATION_CONFIG.md).
"""

#: page file name (under docs/) -> its Markdown
PAGES = {
    "CONFIG_SERVER.md": lambda: render_reference(
        ServerConfig, title="Server configuration reference", intro=SERVER_INTRO),
    "CONFIG_REPLICATION.md": lambda: render_reference(
        ReplicationConfig, title="Replication service configuration reference",
        intro=REPLICATION_INTRO),
}


def stale_pages(docs: Path = ROOT / "docs") -> list[str]:
    """Names of the pages whose committed text differs from what the models give."""
    return [name for name, render in PAGES.items()
            if not (docs / name).exists()
            or (docs / name).read_text(encoding="utf-8") != render()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a page is out of date")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.docs)
        for name in stale:
            print(f"{args.docs / name} is out of date: run "
                  "python -m lakefs_testing.config_reference", file=sys.stderr)
        return 1 if stale else 0
    for name, render in PAGES.items():
        (args.docs / name).write_text(render(), encoding="utf-8")
        print(args.docs / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
