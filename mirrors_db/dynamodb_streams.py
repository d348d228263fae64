"""The DynamoDB mirrors table's change feed: its stream, shard by shard."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import botocore.exceptions

from mirrors_db.dynamodb_items import (
    UNREACHABLE,
    error_code,
    event_from_record,
)
from mirrors_db.errors import (
    MalformedRowError,
    MirrorsDatabaseUnavailableError,
)
from mirrors_db.models import (
    RowKind,
)
from mirrors_db.table import ChangeFeed

log = logging.getLogger(__name__)


@dataclass
class _Shard:
    """Read position in one stream shard."""

    shard_id: str
    iterator: str | None
    last_seq: int | None = None


class StreamFeed(ChangeFeed):
    """Follows a DynamoDB stream: LATEST on the shards open at start, TRIM_HORIZON
    on shards that appear later (their parents are read to the end first).

    Iterators are re-acquired every few seconds from the last sequence number seen,
    which keeps them from expiring (15 minutes on AWS) and re-attaches them to the
    live shard on servers that swap a table's shard out (moto, after a cancelled
    transaction).
    """

    REFRESH_SECONDS = 2.0
    DISCOVER_SECONDS = 10.0

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        organization_id: str | None,
        kinds: frozenset[RowKind],
        interval: float,
    ) -> None:
        super().__init__(organization_id, kinds)
        self._streams = streams
        self._arn = stream_arn
        self._interval = interval
        self._shards: dict[str, _Shard] = {}
        self._done: set[str] = set()
        try:
            self._discover(initial=True)
        except UNREACHABLE as exc:
            raise MirrorsDatabaseUnavailableError(
                f"cannot read stream {stream_arn}: {exc}") from None
        now = time.monotonic()
        self._next_refresh = now + self.REFRESH_SECONDS
        self._next_discover = now + self.DISCOVER_SECONDS
        self._start("mirrors-db-stream-feed")

    def _iterator(self, shard_id: str, kind: str, seq: int | None = None) -> str:
        args: dict[str, Any] = {"StreamArn": self._arn, "ShardId": shard_id,
                                "ShardIteratorType": kind}
        if seq is not None:
            args["SequenceNumber"] = str(seq)
        return str(self._streams.get_shard_iterator(**args)["ShardIterator"])

    def _discover(self, initial: bool) -> None:
        args: dict[str, Any] = {"StreamArn": self._arn}
        shards: list[dict[str, Any]] = []
        while True:
            desc = self._streams.describe_stream(**args)["StreamDescription"]
            shards += desc.get("Shards", [])
            last = desc.get("LastEvaluatedShardId")
            if not last:
                break
            args["ExclusiveStartShardId"] = last
        # a shard read to its end is remembered while the stream lists it (24 hours
        # on DynamoDB), not for ever: shards roll over every few hours
        self._done &= {shard["ShardId"] for shard in shards}
        for shard in shards:
            sid = shard["ShardId"]
            if sid in self._shards or sid in self._done:
                continue
            closed = "EndingSequenceNumber" in shard.get("SequenceNumberRange", {})
            if initial:
                if closed:
                    self._done.add(sid)  # history from before the watch started
                else:
                    self._shards[sid] = _Shard(sid, self._iterator(sid, "LATEST"))
                continue
            if shard.get("ParentShardId") not in self._shards:  # children wait for parents
                self._shards[sid] = _Shard(sid, self._iterator(sid, "TRIM_HORIZON"))

    def _read(self, shard: _Shard) -> None:
        if shard.iterator is None:
            return
        try:
            page = self._streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except botocore.exceptions.ClientError as exc:
            if error_code(exc) == "ExpiredIteratorException":
                self._refresh(shard)
                return
            if error_code(exc) == "TrimmedDataAccessException":
                shard.iterator, shard.last_seq = self._iterator(shard.shard_id, "LATEST"), None
                return
            raise
        for record in page.get("Records", []):
            seq = int(record["dynamodb"]["SequenceNumber"])
            if shard.last_seq is not None and seq <= shard.last_seq:
                continue  # delivered before an iterator refresh
            shard.last_seq = seq
            try:
                event = event_from_record(record)
            except MalformedRowError as exc:
                log.warning("skipping malformed stream record: %s", exc)
                continue
            if event is not None:
                self._emit(event)
        shard.iterator = page.get("NextShardIterator")
        if shard.iterator is None:  # the shard is closed and fully read
            del self._shards[shard.shard_id]
            self._done.add(shard.shard_id)
            self._next_discover = 0.0

    def _refresh(self, shard: _Shard) -> None:
        if shard.last_seq is not None:
            shard.iterator = self._iterator(shard.shard_id, "AFTER_SEQUENCE_NUMBER",
                                            shard.last_seq)
            return
        # Nothing seen yet: take a new LATEST, drain the old iterator up to it, and
        # rely on the sequence check in _read to drop what both return.
        fresh = self._iterator(shard.shard_id, "LATEST")
        self._read(shard)
        if shard.shard_id in self._shards:
            shard.iterator = fresh

    def _poll(self) -> None:
        if self._stop.wait(self._interval):
            return
        for shard in list(self._shards.values()):
            self._read(shard)
        now = time.monotonic()
        if now >= self._next_discover:
            self._discover(initial=False)
            self._next_discover = now + self.DISCOVER_SECONDS
        if now >= self._next_refresh:
            for shard in list(self._shards.values()):
                self._refresh(shard)
            self._next_refresh = now + self.REFRESH_SECONDS

    def _recover(self) -> None:
        for shard in list(self._shards.values()):
            self._refresh(shard)
