"""The web UI's pages over HTTP (no browser): previews, downloads, and the session's
defences (form tokens, forged cookies, where a login may lead, keys deleted)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefs_core.ui.throttle import KEY_FAILURES
from lakefs_testing.live_server import LiveServer, live_server

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("ui-pages"))) as s:
        with s.client() as c:
            assert c.post("/repositories", json={"name": "pages"}).status_code == 201
            table = pa.table({"id": list(range(250)), "name": [f"n{i}" for i in range(250)]})
            parquet = io.BytesIO()
            pq.write_table(table, parquet)
            for path, data in [("t.parquet", parquet.getvalue()), ("d.json", b'{"a":[1,2]}'),
                               ("i.png", PNG), ("big.txt", b"0123456789abcde\n" * 40_000),
                               ("blob.bin", bytes(range(256)) * 40_000)]:
                r = c.post("/repositories/pages/branches/main/objects", params={"path": path},
                           content=data)
                assert r.status_code == 201, r.text
        yield s


def _signed_in(server: LiveServer, key: str | None = None,
               secret: str | None = None) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=server.endpoint, timeout=60)
    r = c.post("/ui/login", data={"access_key_id": key or server.access_key_id,
                                  "secret_access_key": secret or server.secret_access_key,
                                  "next": "/ui/repositories"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/repositories", r.text
    page = c.get("/ui/repositories")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None, page.text
    return c, match.group(1)


def _cells(html: str) -> list[str]:
    return re.findall(r"<td>([^<]*)</td>", html)


def test_previews_parquet_json_text_and_image(server: LiveServer) -> None:
    c, _ = _signed_in(server)
    with contextlib.closing(c):
        page = c.get("/ui/repositories/pages/object", params={"ref": "main", "path": "t.parquet"})
        assert page.status_code == 200
        assert "<th>id</th><th>name</th>" in page.text
        assert "the first 100 of 250 rows" in page.text
        assert _cells(page.text)[:4] == ["0", "n0", "1", "n1"]

        page = c.get("/ui/repositories/pages/object", params={"ref": "main", "path": "d.json"})
        assert json.dumps({"a": [1, 2]}, indent=2).replace('"', "&#34;") in page.text

        page = c.get("/ui/repositories/pages/object", params={"ref": "main", "path": "big.txt"})
        assert "the first 262,144 bytes" in page.text

        page = c.get("/ui/repositories/pages/object", params={"ref": "main", "path": "i.png"})
        assert 'data-kind="image"' in page.text
        image = c.get("/ui/repositories/pages/object/raw",
                      params={"ref": "main", "path": "i.png", "inline": 1})
        assert image.status_code == 200 and image.content == PNG
        assert image.headers["content-type"] == "image/png"
        assert image.headers["content-disposition"] == "inline"
        assert "sandbox" in image.headers["content-security-policy"]


def test_download_streams_the_whole_object(server: LiveServer) -> None:
    c, _ = _signed_in(server)
    with contextlib.closing(c):
        got = c.get("/ui/repositories/pages/object/raw", params={"ref": "main", "path": "blob.bin"})
        assert got.status_code == 200
        assert got.content == bytes(range(256)) * 40_000
        assert got.headers["content-type"] == "application/octet-stream"
        assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''blob.bin"
        missing = c.get("/ui/repositories/pages/object/raw",
                        params={"ref": "main", "path": "nope"})
        assert missing.status_code == 404 and "not found" in missing.text


def test_a_form_without_the_session_token_changes_nothing(server: LiveServer) -> None:
    c, csrf = _signed_in(server)
    with contextlib.closing(c):
        r = c.post("/ui/repositories", data={"name": "forged", "csrf": "not-the-token"})
        assert r.status_code == 400 and "the form is stale" in r.text
        r = c.post("/ui/repositories", data={"name": "forged"})
        assert r.status_code == 400
        with server.client() as api:
            assert api.get("/repositories/forged").status_code == 404
        r = c.post("/ui/repositories", data={"name": "made", "csrf": csrf})
        assert r.status_code == 303 and "notice=repository+made+created" in r.headers["location"]


def test_forged_cookies_and_foreign_next_addresses(server: LiveServer) -> None:
    with httpx.Client(base_url=server.endpoint, timeout=30) as c:
        c.cookies.set("lakefs_ui_session", "forged", path="/ui")
        r = c.get("/ui/repositories/pages/objects")
        assert r.status_code == 303
        assert r.headers["location"] == "/ui/login?next=%2Fui%2Frepositories%2Fpages%2Fobjects"
        r = c.post("/ui/login", data={"access_key_id": server.access_key_id,
                                      "secret_access_key": server.secret_access_key,
                                      "next": "//evil.example/x"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/repositories"
        r = c.post("/ui/login", data={"access_key_id": server.access_key_id,
                                      "secret_access_key": "wrong"})
        assert r.status_code == 401 and "invalid access key" in r.text


def test_a_deleted_key_ends_its_session(server: LiveServer, tmp_path: Path) -> None:
    auth = server.services.auth
    auth.create_user("short-lived")
    auth.attach_policy_to_user("short-lived", "FSReadAll")
    cred = auth.create_credentials("short-lived")
    c, _ = _signed_in(server, cred.access_key_id, cred.secret)
    with contextlib.closing(c):
        assert c.get("/ui/repositories/pages/objects").status_code == 200
        auth.delete_credentials("short-lived", cred.access_key_id)
        r = c.get("/ui/repositories/pages/objects")
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")


def test_sign_out_revokes_the_session_and_its_copies(server: LiveServer) -> None:
    c, csrf = _signed_in(server)
    cookie = c.cookies["lakefs_ui_session"]
    with contextlib.closing(c), httpx.Client(base_url=server.endpoint, timeout=30) as copy:
        copy.cookies.set("lakefs_ui_session", cookie, path="/ui")
        assert copy.get("/ui/repositories/pages/objects").status_code == 200
        r = c.post("/ui/logout", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
        # the copied cookie is refused: by pages and, unread, by forms
        r = copy.get("/ui/repositories/pages/objects")
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
        r = copy.post("/ui/repositories", data={"name": "after-logout", "csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
        with server.client() as api:
            assert api.get("/repositories/after-logout").status_code == 404
        c2, _ = _signed_in(server)  # a new session of the same key works
        with contextlib.closing(c2):
            assert c2.get("/ui/repositories/pages/objects").status_code == 200


def test_failed_sign_ins_of_a_key_are_limited(server: LiveServer) -> None:
    auth = server.services.auth
    auth.create_user("guessed")
    auth.attach_policy_to_user("guessed", "FSReadAll")
    cred = auth.create_credentials("guessed")
    with httpx.Client(base_url=server.endpoint, timeout=30) as c:
        for _ in range(KEY_FAILURES):
            r = c.post("/ui/login", data={"access_key_id": cred.access_key_id,
                                          "secret_access_key": "guess"})
            assert r.status_code == 401 and "invalid access key" in r.text
        # the right secret too is refused now, with the login page and when to retry
        r = c.post("/ui/login", data={"access_key_id": cred.access_key_id,
                                      "secret_access_key": cred.secret})
        assert r.status_code == 429 and "too many failed sign-ins" in r.text
        assert 'name="access_key_id"' in r.text
        assert 0 < int(r.headers["retry-after"]) <= 300
        assert "lakefs_ui_session" not in c.cookies
    c2, _ = _signed_in(server)  # another key from the same address still signs in
    c2.close()


def test_bodies_are_refused_unread_without_a_session_or_past_the_limits(
        server: LiveServer) -> None:
    with httpx.Client(base_url=server.endpoint, timeout=30) as anon:
        # an upload without a session: sent to the login page, nothing read or staged
        r = anon.post("/ui/repositories/pages/objects/upload",
                      data={"branch": "main", "csrf": "x"},
                      files={"file": ("anon.bin", b"x" * 1_000_000)})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
        r = anon.post("/ui/login", content=b"access_key_id=" + b"a" * 70_000,
                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 413

        def trickle() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b"access_key_id="
            for _ in range(20):
                yield b"a" * 8192

        r = anon.post("/ui/login", content=trickle(),
                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 413
    c, csrf = _signed_in(server)
    with contextlib.closing(c):
        r = c.post("/ui/repositories/pages/changes/commit",
                   data={"csrf": csrf, "branch": "main", "message": "m" * 1_100_000})
        assert r.status_code == 413
        r = c.post("/ui/repositories/pages/objects/upload",
                   data={"branch": "main", "csrf": csrf, "path": "up/large.bin"},
                   files={"file": ("large.bin", b"y" * 3_000_000)})
        assert r.status_code == 303 and "notice=uploaded" in r.headers["location"]
    with server.client() as api:
        assert api.get("/repositories/pages/refs/main/objects/stat",
                       params={"path": "anon.bin"}).status_code == 404
        stat = api.get("/repositories/pages/refs/main/objects/stat",
                       params={"path": "up/large.bin"})
        assert stat.status_code == 200 and stat.json()["size_bytes"] == 3_000_000


def test_a_bare_repository_and_a_tag_with_a_slash(server: LiveServer) -> None:
    with server.client() as api:
        assert api.post("/repositories", params={"bare": "true"},
                        json={"name": "bare-one"}).status_code == 201
        assert api.post("/repositories/pages/tags",
                        json={"id": "release/1", "ref": "main"}).status_code == 201
    c, csrf = _signed_in(server)
    with contextlib.closing(c):
        for tab in ("objects", "commits", "changes", "branches", "tags"):
            page = c.get(f"/ui/repositories/bare-one/{tab}")
            assert page.status_code == 200, (tab, page.text)
        assert "No objects here (the ref has no commit)" in c.get(
            "/ui/repositories/bare-one/objects").text
        r = c.post("/ui/repositories/pages/tags/delete", data={"csrf": csrf, "tag": "release/1"})
        assert r.status_code == 303 and "notice=tag+release%2F1+deleted" in r.headers["location"]
    with server.client() as api:
        assert api.get("/repositories/pages/tags/release/1").status_code == 404
