"""The README's screenshots of the web UI, taken in headless Chromium from two live
regions: ``python -m lakefs_testing.screenshots [--out docs/img]`` (``make screenshots``).

It starts two regions on this machine (servers and replication services on the
embedded default), writes a small dataset to ``lakes`` in ``east``, mirrors it to
``west`` (objects copied as S3 replication would, by the test replicator), waits until
the mirror is current, and photographs the pages; the mirrors page is opened after a
commit whose objects arrived some seconds late, and its lag chart (the replication
service's recent samples) shows the wait.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from lakefs_testing.browser import chromium, sign_in, watched_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import MIRRORS, Region, commit, create_mirror, two_regions, upload
from lakefs_testing.replicator import FaultyReplicator

#: how long the objects of the screenshot's late commit are held back
LATE_SECONDS = 8

REPO = "lakes"
MIRROR = "lakes-west"

LAKES = [("Victoria", 59947, 84, "Uganda, Kenya, Tanzania"), ("Baikal", 31722, 1642, "Russia"),
         ("Tanganyika", 32600, 1470, "Tanzania, DR Congo, Burundi, Zambia"),
         ("Titicaca", 8372, 281, "Peru, Bolivia"), ("Superior", 82100, 406, "Canada, USA"),
         ("Malawi", 29600, 706, "Malawi, Mozambique, Tanzania"),
         ("Great Bear", 31153, 446, "Canada"), ("Ladoga", 17700, 230, "Russia")]


def _csv() -> bytes:
    lines = ["lake,area_km2,max_depth_m,countries"]
    lines += [f'{n},{a},{d},"{c}"' for n, a, d, c in LAKES]
    return ("\n".join(lines) + "\n").encode()


def _parquet() -> bytes:
    table = pa.table({"lake": [r[0] for r in LAKES], "area_km2": [r[1] for r in LAKES],
                      "max_depth_m": [r[2] for r in LAKES]})
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def seed(east: Region) -> str:
    """The dataset in ``east``: two commits on main, a branch, one uncommitted change."""
    with east.client() as c:
        c.post("/api/v1/repositories", json={"name": REPO, "storage_namespace":
                                             f"local://{REPO}"}).raise_for_status()
    upload(east, REPO, "main", "README.md", b"# Lakes\n\nAreas and depths of large lakes.\n")
    upload(east, REPO, "main", "data/lakes.csv", _csv())
    commit(east, REPO, "main", "Load the lakes table")
    upload(east, REPO, "main", "data/lakes.parquet", _parquet())
    upload(east, REPO, "main", "data/manifest.json",
           b'{"tables": ["lakes.csv", "lakes.parquet"], "rows": 8}')
    head = commit(east, REPO, "main", "Add the Parquet copy and a manifest")
    with east.client() as c:
        c.post(f"/api/v1/repositories/{REPO}/branches",
               json={"name": "depths-fix", "source": "main"}).raise_for_status()
    return head


def wait_current(east: Region, mirror_id: str, head: str, timeout: float = 120) -> None:
    """Until every followed branch of the mirror has a head and main is at ``head``."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=east.server.endpoint, auth=(ADMIN_KEY, ADMIN_SECRET),
                      timeout=30) as c:
        while time.monotonic() < deadline:
            status = c.get(f"{MIRRORS}/{REPO}/mirrors/{mirror_id}/status").json()
            heads = {b["branch"]: b.get("mirror_head") for b in status.get("branches", [])}
            if heads.get("main") == head and len(heads) >= 2 and all(heads.values()):
                return
            time.sleep(0.5)
    raise RuntimeError(f"mirror {mirror_id} did not catch up in {timeout:.0f}s")


def take(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        mirrors = {"type": "sqlite", "sqlite": {"path": str(Path(tmp) / "mirrors.db")}}
        with two_regions(Path(tmp), mirrors, mode="native", interval="1s") as (east, west), \
                chromium() as browser:
            held = {"on": False}  # while on, nothing new is copied
            crr = FaultyReplicator(east.blockstore_root / REPO, west.blockstore_root / MIRROR,
                                   drop=0, duplicate=0, hold=lambda _rel: held["on"])
            crr.start()
            try:
                head = seed(east)
                mirror = create_mirror(east, REPO, MIRROR, f"local://{MIRROR}")
                wait_current(east, mirror["id"], head)
                shots += _pages(browser, east, west, head, mirror["id"], crr, held, out)
            finally:
                crr.stop()
    return shots


def _pages(browser: Browser, east: Region, west: Region, head: str, mirror_id: str,
           crr: FaultyReplicator, held: dict[str, bool], out: Path) -> list[Path]:
    shots: list[Path] = []
    e, w = east.server.endpoint, west.server.endpoint

    def shoot(page: Page, name: str) -> None:
        target = out / f"{name}.png"
        page.screenshot(path=str(target))
        shots.append(target)

    # an uncommitted change, for the changes page
    upload(east, REPO, "depths-fix", "data/lakes.csv", _csv().replace(b"1642", b"1637"))
    with watched_page(browser, viewport=(1280, 720)) as (page, watch):
        sign_in(page, e, ADMIN_KEY, ADMIN_SECRET)
        for path, name in [
                (f"/ui/repositories/{REPO}/objects?ref=main&prefix=data/", "ui-repository"),
                (f"/ui/repositories/{REPO}/object?ref=main&path=data/lakes.csv", "ui-preview"),
                (f"/ui/repositories/{REPO}/commits/{head}", "ui-commit")]:
            page.goto(e + path)
            shoot(page, name)
        # a commit waits for its last object, then catches up; the mirrors page, opened
        # afterwards, charts that wait from the replication service's lag history
        time.sleep(4)
        held["on"] = True
        upload(east, REPO, "main", "data/late.csv", b"lake,area_km2\nVostok,12500\n")
        upload(east, REPO, "main", "data/lakes.csv", _csv() + b'Vostok,12500,1000,"Antarctica"\n')
        late = commit(east, REPO, "main", "Add Lake Vostok")
        time.sleep(LATE_SECONDS)
        held["on"] = False
        wait_current(east, mirror_id, late)
        time.sleep(5)  # a few more samples on the chart
        page.goto(f"{e}/ui/repositories/{REPO}/mirrors")
        shoot(page, "ui-mirrors")
        if watch.problems:
            raise RuntimeError(f"the UI went wrong: {watch.problems}")
    with watched_page(browser, viewport=(1280, 720)) as (page, watch):
        sign_in(page, w, ADMIN_KEY, ADMIN_SECRET)
        page.goto(f"{w}/ui/repositories/{MIRROR}/objects?ref=main&prefix=data/")
        shoot(page, "ui-mirror-repository")
        if watch.problems:
            raise RuntimeError(f"the UI went wrong: {watch.problems}")
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakefs_testing.screenshots",
                                     description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, default=Path("docs/img"),
                        help="where to write the PNG files (default docs/img)")
    args = parser.parse_args(argv)
    for path in take(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
