"""News of moves of source refs, told at once to the sidecars that follow them (the
fast path of mirroring: the sensor would find each move on its next reading anyway):

- from a source region's sidecar to each destination region of the moved
  repositories' mirrors, through that region's server (``/service/replication/``);
- from one replica of a destination region to the replica that holds the moved
  mirror's shard (:mod:`replication.shards`), signed as the server's events are.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

import httpx

from lakefs_core.errors import LakeFSError
from lakefs_core.ref_events import EVENTS_PATH, SIGNATURE_HEADER, events_key, sign_events
from mirrors_db.models import Mirror, MirrorState
from mirrors_db.table import MirrorsTable
from replication.config import ReplicationConfig
from replication.groups import GroupCutter
from replication.source_index import SourceIndex

log = logging.getLogger("replication.sidecar")



class MoveAnnouncer:
    """Tells the sidecars that follow a moved repository of its move.

    Args:
        config: The sidecar's settings (the regions' endpoints, the replication user).
        table: The mirrors table (read while the change feed is closed).
        http: The pooled client for other sidecars.
        pool: Where the requests are sent from (the caller does not wait for them).
        group_cutter: Cuts the groups of the moved repositories.
        source_index: The mirrors and groups of this region's repositories.
        owner: This replica's owner id.
    """

    def __init__(self, config: ReplicationConfig, table: MirrorsTable, http: httpx.Client,
                 pool: ThreadPoolExecutor, group_cutter: GroupCutter,
                 source_index: SourceIndex, owner: str) -> None:
        self.config = config
        self.region = config.region
        self.org = config.organization_id
        self.table = table
        self.http = http
        self.pool = pool
        self.group_cutter = group_cutter
        self.source_index = source_index
        self.owner = owner
        #: signs the news passed on to another replica of this region (as its server's)
        self._key = events_key(config.auth.encrypt.secret_key.get_secret_value())

    def announce(self, repos: set[str]) -> int:
        """This region's server says ``repos`` moved: cut their groups, and tell each
        destination region of their mirrors (as the feed keeps them; the table if it is
        closed). Returns how many mirrors were told."""
        self.pool.submit(self.group_cutter.sweep, repos, self.source_index.groups())
        known = self.source_index.mirrors_of(repos)
        if known is not None:
            for mirror in known:
                self.pool.submit(self._tell, mirror, mirror.source_repository)
            return len(known)
        told = 0
        for repo in repos:
            token: str | None = None
            while True:
                page = self.table.list_mirrors_by_source(
                    self.org, self.region, repo, page_token=token,
                    page_size=self.config.list_mirrors_page_size)
                for mirror in page.mirrors:
                    if mirror.state in (MirrorState.ACTIVE, MirrorState.CREATING):
                        self.pool.submit(self._tell, mirror, repo)
                        told += 1
                if not page.next_page_token:
                    break
                token = page.next_page_token
        return told

    def _tell(self, mirror: Mirror, repo: str) -> None:
        try:
            url = self.config.endpoint_for(mirror.destination_region).rstrip("/") + EVENTS_PATH
            creds = self.config.source_lakefs  # the sidecars share the replication user's
            self.http.post(url, json={"source_region": self.region,
                                      "events": [{"repository": repo, "refs": []}]},
                           auth=(creds.access_key_id.get_secret_value(),
                                 creds.secret_access_key.get_secret_value()))
        except (httpx.HTTPError, LakeFSError) as e:
            log.debug("could not tell %s: %s", mirror.destination_region, e)

    def pass_on(self, address: str, mirror_id: str) -> bool:
        """Tell the replica of this region at ``address`` (which holds the mirror's
        shard) that ``mirror_id``'s source moved; whether it was told."""
        body = json.dumps({"events": [], "mirrors": [mirror_id],
                           "passed_from": self.owner}).encode()
        try:
            resp = self.http.post(
                address + EVENTS_PATH, content=body,
                headers={"content-type": "application/json",
                         SIGNATURE_HEADER: sign_events(self._key, body)})
            resp.raise_for_status()
        except httpx.HTTPError as e:
            log.debug("could not pass news of mirror %s on to %s: %s", mirror_id, address, e)
            return False
        return True
