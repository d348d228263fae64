"""The commit floor benchmark times the product's own stages: they give back its files."""

from __future__ import annotations

from pathlib import Path

from bench.commit_floor_bench import run


def test_floor_stages_give_back_the_stored_ranges(tmp_path: Path) -> None:
    figures = run(20_000, 1, str(tmp_path))
    assert figures.pop("rows") == 20_000
    assert figures.pop("ranges") >= 2
    assert set(figures) == {"read", "decode", "encodings", "hash", "write", "put"}
    assert all(seconds >= 0 for seconds in figures.values())
    assert figures["write"] > 0 and figures["decode"] > 0
