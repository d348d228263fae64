"""Previews of objects crafted to be costly: a Parquet file that decodes to far more
than its size (the server runs in this process, so its memory is this process's), and
a CSV line that the dialect sniffer takes minutes over (the server runs in a child
process, so that a stalled server cannot stall the test's own timeout)."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefs_core.ui import preview as previews
from lakefs_testing.live_server import LiveServer, ServerProcess, live_server, server_process
from lakefs_testing.ui_login import ui_sign_in

MIB = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("ui-preview-bounds"))) as s:
        with s.client() as c:
            assert c.post("/repositories", json={"name": "bounds"}).status_code == 201
        yield s


@contextlib.contextmanager
def _signed_in(server: LiveServer | ServerProcess) -> Iterator[httpx.Client]:
    """A signed-in UI client whose requests fail, rather than wait, past 30 seconds."""
    with httpx.Client(base_url=server.endpoint, timeout=30) as c:
        r = ui_sign_in(c, server.access_key_id, server.secret_access_key,
                       next="/ui/repositories")
        assert r.status_code == 303, r.text
        yield c


@pytest.fixture
def ui(server: LiveServer) -> Iterator[httpx.Client]:
    with _signed_in(server) as c:
        yield c


def _upload(server: LiveServer | ServerProcess, path: str, data: bytes) -> None:
    with server.client() as c:
        r = c.post("/repositories/bounds/branches/main/objects", params={"path": path},
                   content=data)
        assert r.status_code == 201, r.text


def _show(ui: httpx.Client, path: str) -> str:
    page = ui.get("/ui/repositories/bounds/object", params={"ref": "main", "path": path})
    assert page.status_code == 200, page.text
    return page.text


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        match = re.search(rf"^{field}:\s+(\d+) kB$", f.read(), re.MULTILINE)
    assert match is not None
    return int(match.group(1))


@contextlib.contextmanager
def _peak_growth() -> Iterator[list[int]]:
    """Yields a list that receives how far, in bytes, the resident size rose above its
    level at entry while the block ran (the kernel's high-water mark, reset at entry)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    before = _status_kib("VmRSS")
    growth: list[int] = []
    yield growth
    growth.append((_status_kib("VmHWM") - before) * 1024)


def _bomb(rows: int, value_bytes: int) -> bytes:
    """Parquet whose strings compress to almost nothing: a few KB of file."""
    value = "x" * value_bytes
    table = pa.table({"id": list(range(rows)), "payload": [value] * rows})
    out = io.BytesIO()
    pq.write_table(table, out, use_dictionary=False, compression="zstd")
    return out.getvalue()


def test_a_parquet_file_decoding_to_gigabytes_is_refused_without_decoding(
        server: LiveServer, ui: httpx.Client) -> None:
    data = _bomb(rows=100, value_bytes=5 * MIB)  # 500 MiB of strings
    assert len(data) < 256 * 1024
    _upload(server, "bomb.parquet", data)
    with _peak_growth() as growth:
        text = _show(ui, "bomb.parquet")
    assert growth[0] < 200 * MIB, f"the preview grew the server by {growth[0] / MIB:.0f} MiB"
    assert "too large to preview" in text


def test_a_parquet_preview_shows_the_row_groups_that_fit_and_cuts_long_cells(
        server: LiveServer, ui: httpx.Client) -> None:
    value = "y" * 4 * MIB
    table = pa.table({"id": list(range(40)), "payload": [value] * 40})
    out = io.BytesIO()
    # ten rows (40 MiB) per row group: the first fits the bound, the first two do not
    pq.write_table(table, out, row_group_size=10, use_dictionary=False, compression="zstd")
    _upload(server, "groups.parquet", out.getvalue())
    with _peak_growth() as growth:
        text = _show(ui, "groups.parquet")
    assert "the first 10 of 40 rows" in text
    cells = re.findall(r"<td>([^<]*)</td>", text)
    assert cells[:1] == ["0"] and len(cells) == 20
    assert cells[1] == "y" * previews.CELL_CHARS + "…"
    assert growth[0] < 200 * MIB, f"the preview grew the server by {growth[0] / MIB:.0f} MiB"


def test_a_csv_that_stalls_the_dialect_sniffer_previews_promptly(
        tmp_path: Path) -> None:
    # one 250 KB line of quotes and commas: the sniffer's patterns backtrack over it
    # for minutes; the client's timeout fails the test rather than wait for them
    with server_process(tmp_path / "data") as server, _signed_in(server) as ui:
        with server.client() as c:
            assert c.post("/repositories", json={
                "name": "bounds", "storage_namespace": "local://bounds"}).status_code == 201
        _upload(server, "stall.csv", b'",' * 125_000)
        assert 'data-test="preview-table"' in _show(ui, "stall.csv")
        assert ui.get("/_health").status_code == 204


@pytest.mark.parametrize(("data", "rows"), [
    (b"lake,depth\nBaikal,1642\nTanganyika,1470\n",
     [["lake", "depth"], ["Baikal", "1642"], ["Tanganyika", "1470"]]),
    (b"lake;depth\n\"Baikal; Siberia\";1642\n", [["lake", "depth"], ["Baikal; Siberia", "1642"]]),
    (b"lake\tdepth\nBaikal\t1642\n", [["lake", "depth"], ["Baikal", "1642"]]),
    (b"lake, depth\n\"Victoria, Africa\", 84\n",
     [["lake", "depth"], ["Victoria, Africa", "84"]]),
])
def test_ordinary_csv_keeps_its_dialect(data: bytes, rows: list[list[str]]) -> None:
    shown = previews.csv_preview(data, truncated=False)
    assert [shown.columns, *shown.rows] == rows


def test_the_dialect_of_a_long_csv_is_guessed_from_its_first_lines() -> None:
    header = "a;" * 10 + "b\n"
    data = (header + "".join(f"{i};" * 10 + f"{i}\n" for i in range(2000))).encode()
    shown = previews.csv_preview(data, truncated=False)
    assert len(shown.columns) == 11 and shown.rows[0] == ["0"] * 11
