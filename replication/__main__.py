"""Command line: ``python -m replication run --config FILE`` (``lakefs-replication``)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from lakefs_core.errors import LakeFSError
from lakefs_core.logs import configure_logging
from lakefs_core.protocol.serving import uvicorn_http_options


def uvicorn_options(listen_address: str) -> dict[str, Any]:
    """How uvicorn serves the mirrors API at ``listen_address`` (request heads bounded)."""
    host, _, port = listen_address.rpartition(":")
    return {"host": host.strip("[]") or "127.0.0.1", "port": int(port), "log_level": "warning",
            "access_log": False, **uvicorn_http_options()}


def cmd_run(args: argparse.Namespace) -> int:
    from lakefs_core.memory import MemoryReleaser, leave_pandas_unloaded, tune_allocator

    # before any thread starts and before Arrow loads: weeks of rounds must not grow memory
    tune_allocator()
    leave_pandas_unloaded()
    import uvicorn

    from replication.api import create_app
    from replication.config import load_replication_config
    from replication.sidecar import Sidecar

    config = load_replication_config(args.config)
    configure_logging(config.logging.level, config.logging.format)
    sidecar = Sidecar(config)
    releaser = MemoryReleaser().start()
    sidecar.start()
    logging.getLogger("replication").info(
        "replication service listening", extra={"listen_address": config.listen_address,
                                                "region": config.region})
    try:
        uvicorn.run(create_app(sidecar), **uvicorn_options(config.listen_address))
    finally:
        sidecar.stop()
        releaser.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lakefs-replication",
                                     description="transactional mirroring sidecar")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the replication service")
    run.add_argument("--config", help="YAML config file (else REPLICATION_CONFIG_FILE)")
    run.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except LakeFSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
