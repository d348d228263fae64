"""Everything a server process holds: built once from the config, shared by requests.

Server processes keep no state of their own beyond these handles: every row lives in
the database and every byte in the object store, so any number of processes over
one database and one store serve the same repositories.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lakefs_core.actions import (
    ActionsService,
    HookAlerts,
    HookDestinations,
    HookEnvironment,
    LuaLimits,
    networks,
)
from lakefs_core.auth.backends import open_auth_store
from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.auth.service import AuthService
from lakefs_core.auth.throttle import SignInThrottle
from lakefs_core.block.registry import BlockStores
from lakefs_core.catalog import Catalog
from lakefs_core.config import INSECURE_SECRET_KEY, ServerConfig
from lakefs_core.errors import OrphanedRepositoriesError
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.housekeeping import BranchHousekeeper
from lakefs_core.graveler.importing import Importer
from lakefs_core.graveler.refstores import open_refstore_for
from lakefs_core.ref_events import RefEventNotifier
from lakefs_core.refstore.base import RefStore

log = logging.getLogger("lakefs_core")


@dataclass
class Services:
    config: ServerConfig
    refstore: RefStore
    blockstores: BlockStores
    graveler: Graveler
    catalog: Catalog
    auth: BaseAuthStore
    #: authentication and authorization (auth's public interface)
    access: AuthService
    notifier: RefEventNotifier | None = None
    #: runs the repositories' actions at the engine's hook points
    actions: ActionsService | None = None
    #: zero-copy imports running in this process
    imports: Importer = field(init=False)
    #: deletes expired branches while the server runs (see :meth:`start_housekeeping`)
    housekeeper: BranchHousekeeper | None = field(init=False, default=None)
    #: failed sign-ins at every door of this process (API, UI, S3 gateway)
    sign_ins: SignInThrottle = field(init=False, default_factory=SignInThrottle)

    def __post_init__(self) -> None:
        self.imports = Importer(self.graveler)

    @property
    def serves_locally(self) -> bool:
        """Whether the database is the embedded SQLite and every store a local disk: then
        a request's reads block for less time than handing them to a thread costs."""
        return (self.config.database.type == "local"
                and all(store.type == "local" for store in self.blockstores))

    def start_housekeeping(self) -> None:
        """Start deleting expired branches every ``branches.housekeeping_interval``
        (unless it is 0); the server calls this when it starts serving."""
        interval = self.config.branches.housekeeping_interval.total_seconds()
        if interval and self.housekeeper is None:
            self.housekeeper = BranchHousekeeper(self.graveler, interval)
            self.housekeeper.start()

    def stop_housekeeping(self) -> None:
        if self.housekeeper is not None:
            self.housekeeper.close()
            self.housekeeper = None

    def close(self) -> None:
        self.stop_housekeeping()
        self.imports.close()
        if self.actions is not None:
            self.actions.close()
        if self.notifier is not None:
            self.notifier.close()
        self.auth.close()
        close = getattr(self.refstore, "close", None)
        if close is not None:
            close()
        self.blockstores.close()


def check_repository_storage(graveler: Graveler, blockstores: BlockStores) -> None:
    """Refuse to start while a repository is bound to a storage id the configuration
    lacks (a store removed from ``blockstores.stores``, a multi-store repository on a
    single-store server, or ``backward_compatible`` unset): each is logged, and the
    error names them all.

    Raises:
        OrphanedRepositoriesError: such repositories exist.
    """
    orphaned = graveler.orphaned_repositories()
    if not orphaned:
        return
    configured = ", ".join(repr(i) for i in blockstores.ids()) if blockstores.multi else (
        "the single blockstore")
    for repo in orphaned:
        log.error("repository %s is on storage id %r, which is not configured", repo.id,
                  repo.storage_id, extra={"repository": repo.id, "storage_id": repo.storage_id})
    listed = ", ".join(f"{r.id!r} (storage id {_shown(r.storage_id)})" for r in orphaned[:20])
    more = f" and {len(orphaned) - 20} more" if len(orphaned) > 20 else ""
    raise OrphanedRepositoriesError(
        f"{len(orphaned)} repositories are on storage not in the configuration "
        f"(configured: {configured}): {listed}{more}. Restore their store under "
        "blockstores.stores (or mark the store of repositories without a storage id "
        "backward_compatible), or delete these repositories before removing it",
        [(r.id, r.storage_id) for r in orphaned])


def _shown(storage_id: str) -> str:
    return repr(storage_id) if storage_id else "none: the backward-compatible store"


def build_services(config: ServerConfig, *, startup_tasks: bool = True) -> Services:
    """Open the databases and stores named by ``config``.

    Args:
        config: the server's settings.
        startup_tasks: also bring the stored state up to date once per start: secrets
            moved to a generated key, built-in policies of an earlier version. The
            server does it in its first process, before it starts worker processes,
            which open theirs without.
    """
    refstore = open_refstore_for(config.database)
    blockstores = BlockStores.from_config(config.blockstore, config.blockstores)
    graveler = Graveler(refstore, blockstores.for_storage_id, range_options={
        "cache_size_bytes": config.committed.sstable.memory.cache_size_bytes})
    secret = config.auth.encrypt.secret_key
    assert secret is not None  # the config model fills the embedded default
    try:
        check_repository_storage(graveler, blockstores)
        # the auth store is in the same database (on DynamoDB, the same table)
        auth = open_auth_store(config.database, secret.get_secret_value(),
                               data_dir=config.data_dir)
    except BaseException:
        blockstores.close()
        refstore.close()
        raise
    if startup_tasks and config.auth.encrypt.generated:
        # an installation of an earlier version used a public default key: its stored
        # secrets move to the key just generated
        moved = auth.reencrypt_secrets(INSECURE_SECRET_KEY)
        if moved:
            log.warning("re-encrypted %d stored secrets with the generated key", moved)
    if startup_tasks and auth.is_initialized():
        auth.ensure_builtins()  # built-in policies of an earlier version, brought up to date
    notifier = RefEventNotifier(config.replication.endpoint, secret.get_secret_value())
    graveler.ref_listeners.append(notifier)
    alert = config.actions.alert_webhook
    cache = config.auth.cache
    access = AuthService(auth, cache_size=cache.size if cache.enabled else 0)
    lua = config.actions.lua
    actions = ActionsService(
        graveler,
        lua_limits=LuaLimits(timeout=lua.timeout.total_seconds(), max_memory=lua.max_memory,
                             net_http=lua.net_http_enabled,
                             refused_networks=tuple(config.actions.webhook.denied_networks),
                             deny_private=config.actions.webhook.deny_private),
        lua_workers=lua.workers, authorizer=access,
        alerts=HookAlerts(alert.url, alert.timeout.total_seconds()),
        env=HookEnvironment(config.actions.env.enabled, config.actions.env.prefix),
        destinations=HookDestinations(networks(config.actions.webhook.denied_networks),
                                      config.actions.webhook.deny_private))
    graveler.hooks = actions
    return Services(config=config, refstore=refstore, blockstores=blockstores,
                    graveler=graveler, auth=auth,
                    catalog=Catalog(graveler, link_address_expiry=(
                        config.storage_config.link_address_expiry)),
                    access=access, notifier=notifier, actions=actions)
