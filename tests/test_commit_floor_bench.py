"""The commit floor benchmark times the product's own stages: they give back its files."""

from __future__ import annotations

from pathlib import Path

from bench.commit_floor_bench import run


def test_floor_stages_give_back_the_stored_ranges(tmp_path: Path) -> None:
    rows, ranges, figures = run(20_000, 1, str(tmp_path))
    assert rows == 20_000
    assert ranges >= 2
    assert set(figures) == {"read", "decode", "encodings", "hash", "write", "put"}
    assert all(kept >= 0 and dropped >= 0 for kept, dropped in figures.values())
    assert figures["write"][0] > 0 and figures["decode"][1] > 0
