"""A changed object's content change in a real browser: text side by side from a
commit, a CSV's and a Parquet file's rows and columns from a comparison of branches."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from playwright.sync_api import Page

from lakefs_testing.browser import Watch
from lakefs_testing.regions import Region, commit, create_source
from lakefs_testing.regions import upload as api_upload

pytestmark = pytest.mark.slow

NOTES = "".join(f"note {i}\n" for i in range(40))


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def test_a_commit_shows_a_text_objects_change_side_by_side(
        admin: tuple[Page, Watch], regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "texts")
    api_upload(east, "texts", "main", "notes.txt", NOTES.encode())
    commit(east, "texts", "main", "notes")
    api_upload(east, "texts", "main", "notes.txt",
               NOTES.replace("note 20\n", "note twenty\n").encode() + b"note 40\n")
    head = commit(east, "texts", "main", "edit the notes")
    page, _ = admin
    page.goto(f"{east.server.endpoint}/ui/repositories/texts/commits/{head}")
    page.click("[data-test=diff] tr:has-text('notes.txt') [data-test=object-diff]")
    assert page.inner_text("[data-test=diff-path]") == "notes.txt"
    changed = page.locator("[data-test=text-diff] tr.changed")
    assert changed.count() == 1
    assert changed.locator("td.old").inner_text() == "note 20"
    assert changed.locator("td.new").inner_text() == "note twenty"
    added = page.locator("[data-test=text-diff] tr.added")
    assert added.locator("td.new").all_inner_texts() == ["note 40"]
    gaps = page.locator("[data-test=text-diff] tr.gap").all_inner_texts()
    assert gaps[0].strip() == "… 17 unchanged lines"  # the lines far from a change


def test_compare_shows_what_changed_in_a_csv_and_a_parquet_table(
        admin: tuple[Page, Watch], regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "tables")
    api_upload(east, "tables", "main", "lakes.csv",
               b"lake,area_km2\nVictoria,59947\nBaikal,31722\nTiticaca,8372\n")
    api_upload(east, "tables", "main", "lakes.parquet", _parquet(pa.table({
        "lake": ["Victoria", "Baikal"], "depth_m": [84, 1642]})))
    commit(east, "tables", "main", "lakes")
    with east.client() as c:
        assert c.post("/api/v1/repositories/tables/branches",
                      json={"name": "more", "source": "main"}).status_code == 201
    api_upload(east, "tables", "more", "lakes.csv",
               b"lake,area_km2\nBaikal,31722\nVictoria,59947\nLadoga,17700\n")
    api_upload(east, "tables", "more", "lakes.parquet", _parquet(pa.table({
        "lake": ["Victoria", "Baikal", "Tanganyika"], "depth_m": [84, 1642, 1470],
        "country": ["Uganda", "Russia", "Tanzania"]})))
    commit(east, "tables", "more", "more lakes")
    page, _ = admin
    page.goto(f"{east.server.endpoint}/ui/repositories/tables/compare?base=main&compare=more")

    page.click("[data-test=diff] tr:has-text('lakes.csv') [data-test=object-diff]")
    assert page.inner_text("[data-test=row-counts]") == "3 → 3"
    assert page.inner_text("[data-test=added-count]") == "1"
    assert page.locator("[data-test=rows-added] tbody tr").all_inner_texts() == [
        "Ladoga\t17700"]
    assert page.locator("[data-test=rows-removed] tbody tr").all_inner_texts() == [
        "Titicaca\t8372"]  # Baikal and Victoria only moved: no change

    page.go_back()
    page.click("[data-test=diff] tr:has-text('lakes.parquet') [data-test=object-diff]")
    assert page.inner_text("[data-test=columns-added]") == "country"
    assert page.inner_text("[data-test=row-counts]") == "2 → 3"
    assert page.locator("[data-test=rows-added] th").all_inner_texts() == ["lake", "depth_m"]
    assert page.locator("[data-test=rows-added] tbody tr").all_inner_texts() == [
        "Tanganyika\t1470"]
    assert page.locator("[data-test=rows-removed]").count() == 0
