"""The object lane (stat, read and raw upload beside FastAPI) answers as FastAPI does.

Each request is sent twice to a live server: once as the lane takes it, and once with
a query value the lane leaves to FastAPI (``yes``/``no`` for a boolean, which FastAPI
reads as true/false), so both answers come from the same server and data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefs_core.api.object_lane import LOOP_RETRIES, query_pairs, stage_without_blocking
from lakefs_core.database import WouldWait
from lakefs_testing.live_server import LiveServer, live_server

REPO = "lane"
OBJECTS = f"/repositories/{REPO}/refs/main/objects"
UPLOAD = f"/repositories/{REPO}/branches/main/objects"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root: Path = tmp_path_factory.mktemp("lane")
    with live_server(str(root)) as server:
        with server.client() as api:
            api.post("/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}",
                                            "default_branch": "main"}).raise_for_status()
            api.post(UPLOAD, params={"path": "a/é.txt"}, content=b"0123456789",
                     headers={"content-type": "text/plain",
                              "x-lakefs-meta-color": "blue"}).raise_for_status()
        yield server


def _same(lane: httpx.Response, fastapi: httpx.Response, *, skip: tuple[str, ...] = ()) -> None:
    assert (lane.status_code, lane.content) == (fastapi.status_code, fastapi.content)
    drop = {"date", *skip}
    assert ({k: v for k, v in lane.headers.items() if k not in drop}
            == {k: v for k, v in fastapi.headers.items() if k not in drop})


@pytest.mark.parametrize("params", [
    {"path": "a/é.txt"}, {"path": "a/é.txt", "user_metadata": "false"},
    {"path": "missing"}, {"path": ""}, {"path": "a/é.txt", "presign": "false"}])
def test_stat_answers_as_fastapi(srv: LiveServer, params: dict[str, str]) -> None:
    with srv.client() as api:
        flag = {"user_metadata": {"true": "yes", "false": "no"}[params.get("user_metadata",
                                                                           "true")]}
        _same(api.get(f"{OBJECTS}/stat", params=params),
              api.get(f"{OBJECTS}/stat", params={**params, **flag}))


@pytest.mark.parametrize("headers", [
    {}, {"range": "bytes=2-4"}, {"range": "bytes=20-30"}, {"if-none-match": "*"},
    {"if-match": '"nope"'}])
def test_read_answers_as_fastapi(srv: LiveServer, headers: dict[str, str]) -> None:
    with srv.client() as api:
        for path in ("a/é.txt", "missing"):
            _same(api.get(OBJECTS, params={"path": path}, headers=headers),
                  api.get(OBJECTS, params={"path": path, "presign": "no"}, headers=headers))


def test_refusals_answer_as_fastapi(srv: LiveServer) -> None:
    with srv.client(secret="wrong") as stranger:
        _same(stranger.get(f"{OBJECTS}/stat", params={"path": "a/é.txt"}),
              stranger.get(f"{OBJECTS}/stat", params={"path": "a/é.txt",
                                                       "user_metadata": "yes"}))
    key, secret = srv.repo_writer("other-writer", "other")
    with srv.client(key, secret) as other:
        _same(other.get(OBJECTS, params={"path": "a/é.txt"}),
              other.get(OBJECTS, params={"path": "a/é.txt", "presign": "no"}))
        lane = other.post(UPLOAD, params={"path": "x"}, content=b"data")
        fastapi = other.post(UPLOAD, params={"path": "x", "force": "no"}, content=b"data")
        _same(lane, fastapi, skip=("connection",))
        assert lane.status_code == 403


def test_upload_answers_as_fastapi(srv: LiveServer) -> None:
    with srv.client() as api:
        headers = {"content-type": "text/csv", "x-lakefs-meta-Owner": "me"}
        lane = api.post(UPLOAD, params={"path": "up/lane"}, content=b"a,b\n", headers=headers)
        fastapi = api.post(UPLOAD, params={"path": "up/fastapi", "force": "no"},
                           content=b"a,b\n", headers=headers)
        assert lane.status_code == fastapi.status_code == 201
        answers = [r.json() for r in (lane, fastapi)]
        for answer in answers:
            answer.pop("path"), answer.pop("physical_address"), answer.pop("mtime")
        assert answers[0] == answers[1] == {
            "path_type": "object", "checksum": answers[0]["checksum"], "size_bytes": 4,
            "metadata": {"owner": "me"}, "content_type": "text/csv"}
        assert api.get(OBJECTS, params={"path": "up/lane"}).content == b"a,b\n"
        # conditions and bad input, refused alike
        for params, extra in (({"path": "up/lane"}, {"if-none-match": "*"}),
                              ({"path": "up/new"}, {"if-match": '"nope"'}),
                              ({"path": "up/bad", "force": "true"},
                               {"content-type": "text/" + "x" * 1100}),
                              ({"path": ""}, {})):
            _same(api.post(UPLOAD, params=params, content=b"z", headers=extra),
                  api.post(UPLOAD, params={**params, "force": "no"}, content=b"z",
                           headers=extra), skip=("connection",))
        # an upload to a read-only repository is refused before its body is read
        srv.services.graveler.set_read_only(REPO, True)
        try:
            refused = api.post(UPLOAD, params={"path": "ro"}, content=b"z")
            assert refused.status_code == 403
            assert refused.headers["connection"] == "close"
        finally:
            srv.services.graveler.set_read_only(REPO, False)


def test_an_upload_waits_for_the_write_lock_off_the_event_loop(srv: LiveServer) -> None:
    """On the embedded default an upload is written and staged on the event loop; when
    another process holds SQLite's write lock, its staging waits in a thread, while
    the loop goes on answering, and it is staged once the lock is let go."""
    import sqlite3
    import threading

    from lakefs_core.database import local_database_url

    database = local_database_url(srv.services.config.database.local.path)
    data_dir = Path(srv.services.config.database.local.path).parent

    def objects() -> set[Path]:
        return {p for p in data_dir.rglob("*") if p.is_file() and "metadata.db" not in p.name}

    before = objects()
    other = sqlite3.connect(database.removeprefix("sqlite:///"), isolation_level=None)
    answer: list[httpx.Response] = []

    def upload() -> None:
        with srv.client() as api:
            answer.append(api.post(UPLOAD, params={"path": "locked/x"}, content=b"waited"))

    uploading = threading.Thread(target=upload)
    try:
        other.execute("BEGIN IMMEDIATE")
        uploading.start()
        # the upload's data is written before it is staged
        while not objects() - before:
            assert uploading.is_alive()
            threading.Event().wait(0.01)
        with srv.client() as api:
            for _ in range(5):
                assert api.get(f"{OBJECTS}/stat", params={"path": "a/é.txt"}).status_code == 200
        assert not answer  # still waiting for the lock
    finally:
        other.execute("ROLLBACK")
        other.close()
    uploading.join(60)
    assert answer[0].status_code == 201, answer[0].text
    with srv.client() as api:
        assert api.get(OBJECTS, params={"path": "locked/x"}).content == b"waited"


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(["path", "=", "&", "%2F", "%", "%e9", "%C3%A9", "+", "a",
                                 "é", "%zz", "force", "==", "&&", " ", "%2"]),
                max_size=12).map("".join))
def test_the_lane_reads_a_query_as_the_standard_library_does(query: str) -> None:
    """The lane's own reading of a query string (only what is escaped is unescaped)
    gives what ``parse_qsl(..., keep_blank_values=True)`` gives, FastAPI's reading."""
    assert query_pairs(query) == parse_qsl(query, keep_blank_values=True)


def _refusing(times: int, calls: list[int]) -> Callable[[], None]:
    """A staging that SQLite's write lock refuses ``times`` times on the event loop's
    thread (recording the thread of each call), and that a transfer thread, which
    waits for the lock, always gets through."""
    import threading

    loop_thread = threading.get_ident()

    def stage() -> None:
        calls.append(threading.get_ident())
        if threading.get_ident() == loop_thread and len(calls) <= times:
            raise WouldWait("another process holds the write lock")

    return stage


@pytest.mark.parametrize("refusals", [0, 1, len(LOOP_RETRIES)])
def test_a_staging_meeting_a_lock_held_briefly_is_tried_again_on_the_loop(
        refusals: int) -> None:
    """No thread hand-off while the lock comes free within the tries: each refused try
    wrote nothing, the last one stages."""
    import threading

    calls: list[int] = []

    async def run() -> None:
        await stage_without_blocking(_refusing(refusals, calls), anyio.CapacityLimiter(1))

    anyio.run(run)
    assert calls == [threading.get_ident()] * (refusals + 1)


def test_a_staging_meeting_a_lock_held_longer_waits_for_it_in_a_thread() -> None:
    import threading

    calls: list[int] = []
    limiter = anyio.CapacityLimiter(1)

    async def run() -> None:
        await stage_without_blocking(_refusing(100, calls), limiter, delays=(0.001, 0.002))

    anyio.run(run)
    loop = threading.get_ident()
    assert calls[:3] == [loop] * 3  # the first try, then one after each pause
    assert len(calls) == 4 and calls[3] != loop  # then once, in a transfer thread
