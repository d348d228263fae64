"""Command line: ``python -m lakefs_core run|setup`` (console script ``lakefs-core``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from lakefs_core.config import ConfigError, ServerConfig, load_server_config
from lakefs_core.errors import LakeFSError, NotFoundError
from lakefs_core.logs import configure_logging

if TYPE_CHECKING:
    from lakefs_core.auth.base import BaseAuthStore
    from lakefs_core.auth.model import Credential

log = logging.getLogger("lakefs_core")


def _load(args: argparse.Namespace) -> ServerConfig:
    env = dict(os.environ)
    if getattr(args, "listen", None):
        env["LAKEFS_LISTEN_ADDRESS"] = args.listen
    if getattr(args, "data_dir", None):
        env["LAKEFS_DATA_DIR"] = args.data_dir
    if getattr(args, "workers", None) is not None:
        env["LAKEFS_WORKERS"] = str(args.workers)
    config = load_server_config(args.config, env, quickstart=getattr(args, "quickstart", False))
    if getattr(args, "quickstart", False) and not config.storage_config.default_namespace_prefix:
        config.storage_config.default_namespace_prefix = "local://"
    return config


def setup_first_admin(auth: BaseAuthStore, username: str, access_key_id: str | None = None,
                      secret: str | None = None) -> Credential | None:
    """Create the first admin once; repeating the same setup changes nothing.

    Returns:
        The admin's access key: the new one, or the given one when this setup was done
        before with the same user and key. None when the installation was set up
        before and nothing was created: the call names another user, or names no key
        (an existing secret is never shown again).

    Raises:
        AlreadyExistsError: the user exists, and the given key is not its key or has
            another secret.
        ValidationError: invalid user name, key or secret.
    """
    if auth.is_initialized():
        try:
            auth.get_user(username)
        except NotFoundError:
            return None
        if access_key_id is None:
            return None
    return auth.setup_admin(username, access_key_id, secret)


def cmd_run(args: argparse.Namespace) -> int:
    from lakefs_core.memory import leave_pandas_unloaded, tune_allocator

    # before any thread starts and before Arrow loads (each worker process tunes its own)
    tune_allocator()
    leave_pandas_unloaded()
    from lakefs_core.server import serve, serve_workers
    from lakefs_core.services import build_services

    config = _load(args)
    configure_logging(config.logging.level, config.logging.format)
    _say_where_the_key_is(config, quickstart=args.quickstart)
    services = build_services(config)
    inst = config.installation
    if inst.user_name and inst.access_key_id and inst.secret_access_key:
        try:
            cred = setup_first_admin(services.auth, inst.user_name,
                                     inst.access_key_id.get_secret_value(),
                                     inst.secret_access_key.get_secret_value())
        except BaseException:
            services.close()
            raise
        if cred is None:
            log.warning("already initialized: installation user %s not created", inst.user_name)
        elif args.quickstart:
            print(
                "quickstart: embedded database and local storage in "
                f"{config.data_dir}\n"
                f"  user:              {inst.user_name}\n"
                f"  access key id:     {cred.access_key_id}\n"
                f"  secret access key: {cred.secret}\n",
                flush=True,
            )
    workers = f", {config.workers} worker processes" if config.workers > 1 else ""
    print(f"lakefs-core listening on http://{config.listen_address} "
          f"(API at /api/v1, S3 gateway on the same port{workers})", flush=True)
    if config.workers == 1:
        try:
            serve(services)
        finally:
            services.close()
    else:
        services.close()  # each worker opens its own
        serve_workers(config)
    return 0


def _say_where_the_key_is(config: ServerConfig, *, quickstart: bool) -> None:
    encrypt = config.auth.encrypt
    if not encrypt.key_file:
        return
    if encrypt.generated:
        log.warning("no auth.encrypt.secret_key configured: generated a random one in %s "
                    "(mode 0600); keep that file with the data directory", encrypt.key_file)
    else:
        log.info("auth.encrypt.secret_key read from %s", encrypt.key_file)
    if quickstart:
        log.warning("QUICKSTART: the admin key pair is the well-known quickstart one; "
                    "anyone who can reach %s can use it. Not for production.",
                    config.listen_address)


def cmd_setup(args: argparse.Namespace) -> int:
    from lakefs_core.services import build_services

    config = _load(args)
    configure_logging(config.logging.level, config.logging.format)
    services = build_services(config)
    try:
        cred = setup_first_admin(services.auth, args.user_name, args.access_key_id,
                                 args.secret_access_key)
    finally:
        services.close()
    if cred is None:
        print("lakeFS already initialized: nothing created (existing secrets are not shown "
              "again)")
    else:
        print(f"access_key_id: {cred.access_key_id}\nsecret_access_key: {cred.secret}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lakefs-core",
                                     description="lakeFS-compatible versioning server")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the API and the S3 gateway")
    run.add_argument("--config", help="YAML config file")
    run.add_argument("--listen", help="listen address host:port (LAKEFS_LISTEN_ADDRESS)")
    run.add_argument("--data-dir", help="data directory of the embedded default")
    run.add_argument("--workers", type=int, metavar="N",
                     help="server processes on the one listening socket (LAKEFS_WORKERS)")
    run.add_argument("--quickstart", action="store_true",
                     help="embedded database, local storage and the quickstart admin key")
    run.set_defaults(func=cmd_run)
    setup = sub.add_parser("setup", help="create the first admin user (idempotent)")
    setup.add_argument("--config", help="YAML config file")
    setup.add_argument("--data-dir", help="data directory of the embedded default")
    setup.add_argument("--user-name", required=True)
    setup.add_argument("--access-key-id")
    setup.add_argument("--secret-access-key")
    setup.set_defaults(func=cmd_setup)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        return int(args.func(args))
    except (ConfigError, LakeFSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
