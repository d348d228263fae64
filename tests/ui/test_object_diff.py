"""What the object diff page computes: text side by side, and a table's change."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from lakefs_core.ui import object_diff as diffs
from lakefs_core.ui.object_diff import Line, Version


def _whole(data: bytes) -> Version:
    return Version(True, data, len(data))


def _text(lines: list[str]) -> Version:
    return _whole("".join(f"{line}\n" for line in lines).encode())


def _parquet(table: pa.Table) -> Version:
    out = io.BytesIO()
    pq.write_table(table, out)
    return _whole(out.getvalue())


def test_text_changes_show_side_by_side_with_context_and_gaps() -> None:
    old = [f"line {i}" for i in range(30)]
    new = [*old[:10], "line ten", *old[11:20], *old[21:], "appended"]
    got = diffs.text_diff(_text(old), _text(new))
    assert got.lines[0] == Line("gap", old_no=7)
    assert Line("changed", 11, "line 10", 11, "line ten") in got.lines
    assert Line("removed", 21, "line 20", None, "") in got.lines
    assert got.lines[-1] == Line("added", None, "", 30, "appended")
    gaps = [line.old_no for line in got.lines if line.kind == "gap"]
    shown = sum(1 for line in got.lines if line.old_no and line.kind != "gap")
    assert sum(g or 0 for g in gaps) + shown == 30  # every old line shown or counted


def test_an_added_object_is_all_added_lines_and_the_same_text_says_so() -> None:
    got = diffs.text_diff(Version(False), _text(["a", "b"]))
    assert [line.kind for line in got.lines] == ["added", "added"]
    same = diffs.text_diff(_text(["a"]), _text(["a"]))
    assert same.same and same.lines == []


def test_text_is_compared_within_its_bound_and_says_where_it_was_cut() -> None:
    data = b"x" * 10 + b"\n" + b"partial line"
    got = diffs.text_diff(Version(True, data, 5 * diffs.TEXT_BYTES), _text(["y"]))
    assert "first 23 of 5,242,880 bytes" in got.notes[0]
    assert [line.old for line in got.lines if line.old_no] == ["x" * 10]


def test_csv_rows_added_and_removed_are_compared_whole_and_moved_rows_are_no_change() -> None:
    old = _whole(b"lake,area\nVictoria,1\nBaikal,2\nLadoga,3\n")
    new = _whole(b"lake,area\nLadoga,3\nBaikal,20\nVictoria,1\nTana,4\n")
    got = diffs.table_diff(diffs.read_table("csv", old), diffs.read_table("csv", new))
    assert (got.rows_before, got.rows_after) == ("3", "4")
    assert got.removed == [["Baikal", "2"]] and got.added == [["Baikal", "20"], ["Tana", "4"]]
    assert (got.removed_count, got.added_count) == (1, 2)
    assert got.columns_added == got.columns_removed == [] and got.notes == []


def test_parquet_schema_changes_and_rows_on_the_shared_columns() -> None:
    old = _parquet(pa.table({"lake": ["V", "B"], "depth": [84, 1642], "gone": [1, 2]}))
    new = _parquet(pa.table({"lake": ["V", "T"], "depth": [84, 281], "new": ["a", "b"]}))
    got = diffs.table_diff(diffs.read_table("parquet", old), diffs.read_table("parquet", new))
    assert got.columns_added == ["new"] and got.columns_removed == ["gone"]
    assert got.compared == ["lake", "depth"]
    assert got.added == [["T", "281"]] and got.removed == [["B", "1642"]]
    assert "compared on the 2 columns both versions have" in got.notes[0]


def test_table_rows_are_compared_within_the_row_bound_and_sampled() -> None:
    rows = diffs.TABLE_ROWS + 500
    old = _parquet(pa.table({"n": list(range(rows))}))
    new = _parquet(pa.table({"n": [-i for i in range(1, rows + 1)]}))
    got = diffs.table_diff(diffs.read_table("parquet", old), diffs.read_table("parquet", new))
    assert (got.rows_before, got.rows_after) == (f"{rows:,}", f"{rows:,}")
    assert got.added_count == got.removed_count == diffs.TABLE_ROWS
    assert len(got.added) == len(got.removed) == diffs.SAMPLE_ROWS
    assert any("only the first 10,000 rows of the old version" in n for n in got.notes)


def test_a_parquet_file_over_the_read_bound_is_not_decoded() -> None:
    big = Version(True, b"", diffs.previews.PARQUET_MAX_BYTES + 1)
    got = diffs.table_diff(diffs.read_table("parquet", big),
                           diffs.read_table("parquet", _parquet(pa.table({"a": [1]}))))
    assert "old version's rows are not compared" in got.notes[0]
    assert got.added == [] and got.rows_after == "1"
