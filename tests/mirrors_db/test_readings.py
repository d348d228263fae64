"""Sensor readings: pages of confirmations, replaced only by later readings; the same
contract on SQLite, PostgreSQL and DynamoDB."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mirrors_db import InvalidMirrorArgumentError, MirrorsTable, SensorReading
from mirrors_db.models import SENSOR_READING_BRANCHES, SENSOR_READING_PAGE, reading_pages
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
    too_wide = {f"m{i}": tuple(f"b{j}" for j in range(100)) for i in range(11)}
    for bad in (reading(dest="a#b"), reading(page=-1),
                SensorReading(ORG, "west", "east", 0, T0, too_many),
                SensorReading(ORG, "west", "east", 0, T0, too_wide),
                reading(**{"bad#id": ("main",)})):
        with pytest.raises(InvalidMirrorArgumentError):
            table.put_sensor_reading(bad)
    assert table.list_sensor_readings(ORG) == []


def test_a_reading_is_split_in_pages_a_row_can_hold() -> None:
    confirmed = {f"m{i:04d}": ("main",) for i in range(1200)}
    confirmed |= {f"w{i}": tuple(f"b{j}" for j in range(300)) for i in range(5)}
    pages = reading_pages(confirmed)
    assert [len(p) for p in pages] == [500, 500, 202, 3]
    assert all(sum(map(len, p.values())) <= SENSOR_READING_BRANCHES for p in pages)
    assert {k: v for p in pages for k, v in p.items()} == confirmed
    for i, page in enumerate(pages):  # each page is a valid reading
        SensorReading(ORG, "west", "east", i, T0, page).validate()
    assert reading_pages({}) == []
    with pytest.raises(InvalidMirrorArgumentError):
        reading_pages({"huge": tuple(f"b{j}" for j in range(SENSOR_READING_BRANCHES + 1))})
