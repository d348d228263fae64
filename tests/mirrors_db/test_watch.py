"""watch(): DynamoDB Streams, PostgreSQL LISTEN/NOTIFY and SQLite change-log polling."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mirrors_db import (
    ChangeEvent,
    ChangeFeed,
    MirrorBranch,
    MirrorExistsError,
    MirrorsTable,
    MirrorState,
    RowKind,
)
from tests.mirrors_db.conftest import ORG, spec

WAIT = 15.0  # seconds; generous for a loaded CI machine, never reached when things work


def take(feed: ChangeFeed, count: int) -> list[ChangeEvent]:
    events: list[ChangeEvent] = []
    for _ in range(count):
        event = feed.get(timeout=WAIT)
        assert event is not None, f"only {len(events)} of {count} events arrived: {events}"
        events.append(event)
    return events


def test_watch_delivers_each_change_with_its_row(table: MirrorsTable) -> None:
    with table.watch(poll_interval=0.05) as feed:
        m = table.create_mirror(spec())
        active = table.update_mirror(m.with_state(MirrorState.ACTIVE))
        progress = table.put_branch_progress(MirrorBranch(ORG, m.id, "main", source_head="c1"))
        lease = table.acquire_lease(ORG, "us-west-2/sensor", "replica-a", ttl=30)
        events = take(feed, 4)
        assert [(e.kind, e.key, e.deleted) for e in events] == [
            (RowKind.MIRROR, (m.id,), False),
            (RowKind.MIRROR, (m.id,), False),
            (RowKind.BRANCH, (m.id, "main"), False),
            (RowKind.LEASE, ("us-west-2/sensor",), False),
        ]
        assert [e.row for e in events] == [m, active, progress, lease]
        assert events[2].mirror_id == m.id and events[3].mirror_id is None

        table.delete_mirror(ORG, m.id)
        removed = {(e.kind, e.key, e.deleted, e.row) for e in take(feed, 2)}
        assert removed == {(RowKind.MIRROR, (m.id,), True, None),
                           (RowKind.BRANCH, (m.id, "main"), True, None)}


def test_watch_sees_only_later_changes_of_its_organization_and_kinds(
    table: MirrorsTable,
) -> None:
    before = table.create_mirror(spec())
    with table.watch(ORG, kinds=frozenset({RowKind.MIRROR}), poll_interval=0.05) as feed:
        table.create_mirror(spec(org="other-org"))
        table.acquire_lease(ORG, "lease", "me", ttl=30)
        table.update_mirror(before.with_state(MirrorState.ACTIVE))
        event = take(feed, 1)[0]
        assert (event.kind, event.organization_id, event.key) == (RowKind.MIRROR, ORG,
                                                                  (before.id,))
        assert event.row is not None and event.row.version == 2
        assert feed.get(timeout=0.5) is None


def test_refused_writes_produce_no_events(table: MirrorsTable) -> None:
    with table.watch(poll_interval=0.05) as feed:
        first = table.create_mirror(spec(name="one"))
        assert take(feed, 1)[0].key == (first.id,)
        with pytest.raises(MirrorExistsError):
            table.create_mirror(spec(name="one"))
        second = table.create_mirror(spec(name="two"))
        assert take(feed, 1)[0].key == (second.id,)


def test_two_watchers_each_get_every_event(table: MirrorsTable) -> None:
    with table.watch(poll_interval=0.05) as a, table.watch(poll_interval=0.05) as b:
        m = table.create_mirror(spec())
        assert take(a, 1)[0].row == m
        assert take(b, 1)[0].row == m


def test_close_ends_iteration_from_another_thread(table: MirrorsTable) -> None:
    feed = table.watch(poll_interval=0.05)
    seen: list[ChangeEvent] = []
    consumer = threading.Thread(target=lambda: seen.extend(feed))
    consumer.start()
    m = table.create_mirror(spec())
    for _ in range(int(WAIT / 0.05)):
        if seen:
            break
        consumer.join(timeout=0.05)
    feed.close()
    consumer.join(timeout=WAIT)
    assert not consumer.is_alive()
    assert [e.key for e in seen] == [(m.id,)]
    assert feed.closed and feed.get(timeout=0.1) is None


def test_async_iteration(table: MirrorsTable) -> None:
    async def first_event(feed: ChangeFeed) -> ChangeEvent:
        async for event in feed:
            return event
        raise AssertionError("feed ended without an event")

    with table.watch(poll_interval=0.05) as feed:
        m = table.create_mirror(spec())
        event = asyncio.run(asyncio.wait_for(first_event(feed), timeout=WAIT))
    assert event.row == m


def test_events_of_large_rows_still_carry_the_row(table: MirrorsTable) -> None:
    # 2,000 four-byte characters: too big for a PostgreSQL NOTIFY payload, so the
    # watcher fetches the row instead
    m = table.create_mirror(spec())
    with table.watch(poll_interval=0.05) as feed:
        failed = table.update_mirror(m.with_state(MirrorState.FAILED, "\U0001f525" * 2000))
        event = take(feed, 1)[0]
    assert event.row == failed
    assert len(failed.error.encode()) == 8000


class _RollingStream:
    """A DynamoDB Streams client whose shards roll over (a unit-test stand-in)."""

    def __init__(self) -> None:
        self.shards: list[dict] = []
        self.lock = threading.Lock()

    def roll(self, n: int) -> None:
        """Close the open shard (n - 1) and open shard n; shards before n - 3 expire."""
        with self.lock:
            for s in self.shards:
                s["SequenceNumberRange"]["EndingSequenceNumber"] = "1"
            self.shards = [s for s in self.shards if int(s["ShardId"]) >= n - 3]
            self.shards.append({"ShardId": str(n), "ParentShardId": str(n - 1),
                                "SequenceNumberRange": {"StartingSequenceNumber": "0"}})

    def describe_stream(self, **_: object) -> dict:
        with self.lock:
            return {"StreamDescription": {"Shards": [dict(s) for s in self.shards]}}

    def get_shard_iterator(self, ShardId: str, **_: object) -> dict:  # noqa: N803
        return {"ShardIterator": ShardId}

    def get_records(self, ShardIterator: str, **_: object) -> dict:  # noqa: N803
        with self.lock:
            open_ids = {s["ShardId"] for s in self.shards
                        if "EndingSequenceNumber" not in s["SequenceNumberRange"]}
        # a closed shard is read to its end at once
        return {"Records": [],
                "NextShardIterator": ShardIterator if ShardIterator in open_ids else None}


def test_stream_feed_forgets_shards_the_stream_no_longer_lists() -> None:
    """Shards roll over every few hours on DynamoDB: the feed's memory of the ones it
    read to the end stays bounded by what the stream still lists."""
    from mirrors_db.dynamodb_streams import StreamFeed

    stream = _RollingStream()
    stream.roll(0)
    feed = StreamFeed(stream, "arn", None, frozenset(RowKind), interval=0.01)
    try:
        for n in range(1, 40):
            stream.roll(n)
            feed._next_discover = 0.0  # discover on the next poll
            time.sleep(0.03)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and "39" not in feed._shards:
            time.sleep(0.02)
        assert "39" in feed._shards  # it follows the newest shard
        assert len(feed._done) <= 4  # and remembers only the listed shards it finished
    finally:
        feed.close()


def test_a_stream_image_of_the_keys_alone_is_no_change() -> None:
    """moto sends an update that creates an item as two records, the first holding only
    the keys; it is neither a row nor a malformed one. A full image still decodes."""
    from mirrors_db.dynamodb_items import event_from_record

    keys = {"organization_id": {"S": ORG}, "row_id": {"S": "lease#l1"}}
    first = {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": dict(keys)}}
    assert event_from_record(first) is None
    full = {**keys, "name": {"S": "l1"}, "owner": {"S": "me"},
            "expires_at": {"N": "1795622901212518"}, "version": {"N": "1"}}
    event = event_from_record({"eventName": "INSERT",
                               "dynamodb": {"Keys": keys, "NewImage": full}})
    assert event is not None and event.row is not None and event.row.owner == "me"
