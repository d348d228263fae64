"""The mirror repositories of a destination region: created and deleted as the
mirrors table's rows say, and those of deleted mirrors swept away."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx

from lakefs_core.errors import (
    LakeFSError,
    RepositoryExistsError,
    StorageNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.mirror import MirrorService
from lakefs_core.graveler.model import MirrorMarking
from mirrors_db.errors import MirrorNotFoundError, VersionConflictError
from mirrors_db.models import Mirror, MirrorState
from mirrors_db.table import MirrorsTable
from replication.metrics import ReplicationMetrics
from replication.source import SourceClient, SourceForbiddenError

log = logging.getLogger("replication.sidecar")


class MirrorRepositories:
    """What the mirrors manager does to this region's repositories.

    Args:
        table: The mirrors table.
        organization_id: The organization.
        region: This region.
        mirrors: The engine's mirroring interface over this region's refstore.
        client_for: The lakeFS API of a region (the source's, or this one's).
        metrics: The sidecar's metrics.
        report: Shows what keeps a mirror from being created in its row.
        page_size: Page size when this region's repositories are listed.
    """

    def __init__(self, table: MirrorsTable, organization_id: str, region: str,
                 mirrors: MirrorService, client_for: Callable[[str], SourceClient],
                 metrics: ReplicationMetrics, report: Callable[[Mirror, str], Mirror],
                 page_size: int) -> None:
        self.table = table
        self.org = organization_id
        self.region = region
        self.mirrors = mirrors
        self.client_for = client_for
        self.metrics = metrics
        self.report = report
        self.page_size = page_size
        #: mirror repositories here whose mirror the table does not know (reported)
        self._unknown: set[str] = set()

    def sweep(self, listed: dict[str, Mirror]) -> list[str]:
        """Delete this region's mirror repositories whose mirror is deleted.

        A replica acting on a stale listing of the table (a DynamoDB index lags its
        writes) can create a mirror's repository after another replica deleted it.
        This region's repositories are listed through its lakeFS API
        (``list_repositories_page_size`` a page); a mirror repository whose mirror row
        is ``deleted`` is deleted. The rows are those the last mirrors-manager round
        listed (``listed``: a few requests for all of them); a mirror it did not list is read by
        id. One whose row is missing is only reported: the table may not be the one the
        mirror was created in.

        Returns:
            The repositories deleted.
        """
        deleted = []
        unknown: set[str] = set()
        listing = self.client_for(self.region).list_repositories(self.page_size)
        for repo in listing:
            name = str(repo.get("id", ""))
            marking = self.mirrors.marking(name) if repo.get("read_only") else None
            if marking is None or marking.detached:
                continue
            try:
                mirror = (listed.get(marking.mirror_id)
                          or self.table.get_mirror(self.org, marking.mirror_id))
            except MirrorNotFoundError:
                unknown.add(name)
                if name not in self._unknown:  # once, not every round
                    log.warning("repository %s is mirror %s's, which the mirrors table does "
                                "not know; left alone", name, marking.mirror_id,
                                extra={"repository": name, "mirror": marking.mirror_id})
                continue
            if (mirror.state is MirrorState.DELETED
                    and self.mirrors.delete_repository(name, mirror.id)):
                log.info("deleted the repository of a deleted mirror",
                         extra={"repository": name, "mirror": mirror.id})
                deleted.append(name)
        self._unknown = unknown  # those still there, reported once
        return deleted

    def manage(self, mirror: Mirror) -> Mirror:
        """Create the repository of a mirror being created, delete that of a mirror being
        deleted, and move its row on; returns the row as stored now."""
        try:
            if mirror.state is MirrorState.CREATING:
                try:
                    source = self.client_for(mirror.source_region).get_repository(
                        mirror.source_repository)
                    self.mirrors.create_repository(
                        mirror.name, mirror.storage_namespace, source["default_branch"],
                        MirrorMarking(mirror.id, mirror.source_region,
                                      mirror.source_repository),
                        storage_id=mirror.storage_id)
                except (RepositoryExistsError, ValidationError, StorageNotFoundError) as e:
                    return self.table.update_mirror(mirror.with_state(MirrorState.FAILED, str(e)))
                return self.table.update_mirror(mirror.with_state(MirrorState.ACTIVE))
            if mirror.state is MirrorState.DELETING:
                self.mirrors.delete_repository(mirror.name, mirror.id)
                return self.table.update_mirror(mirror.with_state(MirrorState.DELETED))
        except VersionConflictError:
            return self.table.get_mirror(self.org, mirror.id)
        except (LakeFSError, httpx.HTTPError) as e:
            log.warning("mirror %s: %s", mirror.id, e)
            if isinstance(e, SourceForbiddenError):
                self.metrics.permission_errors.labels(mirror.name, e.action).inc()
            return self.report(mirror, str(e))
        return mirror
