"""Sensor readings: pages of confirmations, replaced only by later readings; the same
contract on SQLite, PostgreSQL and DynamoDB."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mirrors_db import InvalidMirrorArgumentError, MirrorsTable, SensorReading
from mirrors_db.models import SENSOR_READING_PAGE
from tests.mirrors_db.conftest import ORG

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def reading(page: int = 0, at: datetime = T0, dest: str = "west", source: str = "east",
            **confirmed: tuple[str, ...]) -> SensorReading:
    return SensorReading(ORG, dest, source, page, at, dict(confirmed))


def test_a_page_is_replaced_by_a_later_reading_only(table: MirrorsTable) -> None:
    assert table.list_sensor_readings(ORG) == []
    first = reading(m1=("main", "dev"), m2=("main",))
    assert table.put_sensor_reading(first)
    assert table.list_sensor_readings(ORG) == [first]

    later = reading(at=T0 + timedelta(seconds=60), m1=("main",))
    assert table.put_sensor_reading(later)
    assert table.list_sensor_readings(ORG) == [later]

    # a slower replica's earlier (or equal) reading does not win
    assert not table.put_sensor_reading(reading(at=T0 + timedelta(seconds=30), m3=("x",)))
    assert not table.put_sensor_reading(reading(at=T0 + timedelta(seconds=60), m3=("x",)))
    assert table.list_sensor_readings(ORG) == [later]


def test_readings_are_listed_per_destination_and_page(table: MirrorsTable) -> None:
    pages = [reading(0, m1=("main",)), reading(1, m2=("main",)),
             reading(0, dest="north", m3=("main",)),
             reading(0, source="south", m4=("a/b", "c d"))]
    for p in pages:
        assert table.put_sensor_reading(p)
    key = lambda r: (r.destination_region, r.source_region, r.page)  # noqa: E731
    assert sorted(table.list_sensor_readings(ORG), key=key) == sorted(pages, key=key)
    assert sorted(table.list_sensor_readings(ORG, "west"), key=key) == sorted(
        [pages[0], pages[1], pages[3]], key=key)
    assert table.list_sensor_readings(ORG, "nowhere") == []
    assert table.list_sensor_readings("other-org") == []


def test_a_bad_reading_is_refused(table: MirrorsTable) -> None:
    too_many = {f"m{i}": ("main",) for i in range(SENSOR_READING_PAGE + 1)}
    for bad in (reading(dest="a#b"), reading(page=-1),
                SensorReading(ORG, "west", "east", 0, T0, too_many),
                reading(**{"bad#id": ("main",)})):
        with pytest.raises(InvalidMirrorArgumentError):
            table.put_sensor_reading(bad)
    assert table.list_sensor_readings(ORG) == []
