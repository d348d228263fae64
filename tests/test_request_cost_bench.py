"""The request-cost bench runs end to end and prints both of its tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import request_cost


def test_the_bench_prints_cpu_and_its_kernel_part(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    request_cost.main(["--requests", "5", "--rounds", "1", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"data under {tmp_path}" in out
    tables = out.split("of which in the kernel")
    assert len(tables) == 2
    for table in tables:
        rows = {line[:20].strip(): line[20:].split() for line in table.splitlines()
                if line[:20].strip() in request_cost.OPERATIONS}
        assert set(rows) == set(request_cost.OPERATIONS)
        assert len(rows["stat"]) == 3 and len(rows["gateway GET 4 KiB"]) == 3
        assert rows["gateway GET 4 KiB"][1] == "-"  # the minimal app has no gateway
        for cells in rows.values():
            for cell in cells:
                assert cell == "-" or float(cell.replace(",", "")) >= 0


def test_a_missing_data_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        request_cost.main(["--data-dir", str(tmp_path / "nowhere")])
