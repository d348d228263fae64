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

from lakefs_core.auth.throttle import FREE_PAIR_FAILURES
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.ui_login import ui_sign_in

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




def _signed_in(server: LiveServer, key: str | None = None, secret: str | None = None,
               transport: httpx.HTTPTransport | None = None) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=server.endpoint, timeout=60, transport=transport)
    r = ui_sign_in(c, key or server.access_key_id, secret or server.secret_access_key,
                 next="/ui/repositories")
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
        for target in ("//evil.example/x", "/ui/../x", "/ui/%2e%2e/api/v1/x", "/ui//evil.example",
                       "/ui/\\evil.example", "/ui/./x", "https://evil.example/ui/x",
                       "/ui/%5cevil", "/uix"):
            r = ui_sign_in(c, server.access_key_id, server.secret_access_key, next=target)
            assert r.status_code == 303 and r.headers["location"] == "/ui/repositories", target
            assert 'value="/ui/repositories"' in c.get("/ui/login", params={"next": target}).text
        r = ui_sign_in(c, server.access_key_id, server.secret_access_key,
                     next="/ui/repositories/pages/objects?prefix=a/")
        assert r.headers["location"] == "/ui/repositories/pages/objects?prefix=a/"
        r = ui_sign_in(c, server.access_key_id, "wrong")
        assert r.status_code == 401 and "invalid access key" in r.text


def test_the_login_form_cannot_be_posted_from_another_site(server: LiveServer) -> None:
    """Login CSRF: a page elsewhere posting its own key pair signs no browser in."""
    with httpx.Client(base_url=server.endpoint, timeout=30) as c:
        pair = {"access_key_id": server.access_key_id,
                "secret_access_key": server.secret_access_key}
        for token in ({}, {"login_token": "guessed"}):
            r = c.post("/ui/login", data={**pair, **token})
            assert r.status_code == 400 and "comes from another site" in r.text
            assert "lakefs_ui_session" not in c.cookies
        # the token of one browser's cookie is no good with another's
        form = c.get("/ui/login")
        found = re.search(r'name="login_token" value="([^"]+)"', form.text)
        assert found is not None
        with httpx.Client(base_url=server.endpoint, timeout=30) as other:
            other.get("/ui/login")
            r = other.post("/ui/login", data={**pair, "login_token": found.group(1)})
            assert r.status_code == 400 and "lakefs_ui_session" not in other.cookies
        r = c.post("/ui/login", data={**pair, "login_token": found.group(1)})
        assert r.status_code == 303 and "lakefs_ui_session" in c.cookies


def test_no_page_may_be_framed_or_load_from_elsewhere(server: LiveServer) -> None:
    c, _ = _signed_in(server)
    with contextlib.closing(c), httpx.Client(base_url=server.endpoint, timeout=30) as anon:
        answers = [anon.get("/ui/login"), anon.get("/ui/repositories"),
                   anon.get("/ui/static/ui.css"), c.get("/ui/repositories"),
                   c.get("/ui/repositories/pages/objects"), c.get("/ui/repositories/nope")]
        for answer in answers:
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["x-content-type-options"] == "nosniff"
            csp = answer.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp
        # a download keeps its own, stricter policy
        raw = c.get("/ui/repositories/pages/object/raw", params={"ref": "main", "path": "d.json"})
        assert raw.headers["content-security-policy"].startswith("sandbox")


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


def test_failed_sign_ins_slow_the_guesser_and_not_the_owner(server: LiveServer) -> None:
    with server.patient_sign_in_throttle():
        auth = server.services.auth
        auth.create_user("guessed")
        auth.attach_policy_to_user("guessed", "FSReadAll")
        cred = auth.create_credentials("guessed")
        with httpx.Client(base_url=server.endpoint, timeout=30) as c:
            for _ in range(FREE_PAIR_FAILURES + 1):
                r = ui_sign_in(c, cred.access_key_id, "guess")
                assert r.status_code == 401 and "invalid access key" in r.text
            # the guesser's address must wait, with the login page and when to retry
            r = ui_sign_in(c, cred.access_key_id, cred.secret)
            assert r.status_code == 429 and "too many failed sign-ins" in r.text
            assert 'name="access_key_id"' in r.text
            assert 0 < int(r.headers["retry-after"]) <= 300
            assert "lakefs_ui_session" not in c.cookies
        # the owner, from another address, signs in: to the UI and to the API
        elsewhere = httpx.HTTPTransport(local_address="127.0.0.2")
        c2, _ = _signed_in(server, cred.access_key_id, cred.secret, transport=elsewhere)
        c2.close()
        with httpx.Client(base_url=server.api, auth=(cred.access_key_id, cred.secret),
                          transport=httpx.HTTPTransport(local_address="127.0.0.2")) as api:
            assert api.get("/user").status_code == 200
        c3, _ = _signed_in(server)  # another key from the guesser's address too
        c3.close()


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


def test_an_object_diff_reads_each_side_within_its_bound_and_says_so(
        server: LiveServer) -> None:
    big = b"".join(b"%07d some text of the line\n" % i for i in range(60_000))  # ~2 MiB
    with server.client() as api:
        for data in (big, big.replace(b"0000010 some", b"0000010 SOME")):
            r = api.post("/repositories/pages/branches/main/objects",
                         params={"path": "long.txt"}, content=data)
            assert r.status_code == 201, r.text
            r = api.post("/repositories/pages/branches/main/commits",
                         json={"message": "long text"})
            assert r.status_code == 201, r.text
        head = r.json()
    c, _ = _signed_in(server)
    with contextlib.closing(c):
        page = c.get("/ui/repositories/pages/object/diff", params={
            "left": head["parents"][0], "right": head["id"], "path": "long.txt"})
    assert page.status_code == 200
    assert "compared on its first 1,048,5" in page.text and f"of {len(big):,} bytes" in page.text
    assert re.search(r'<tr class="changed">.*0000010 some.*0000010 SOME', page.text)


def test_administration_forms_need_the_sessions_token(server: LiveServer) -> None:
    c, csrf = _signed_in(server)
    with contextlib.closing(c):
        for path, data in [("/ui/auth/users", {"id": "forged"}),
                           ("/ui/auth/groups", {"id": "forged"}),
                           ("/ui/auth/policies", {"id": "forged", "document": "[]"}),
                           ("/ui/auth/users/admin/credentials", {})]:
            r = c.post(path, data={**data, "csrf": "not-the-token"})
            assert r.status_code == 400 and "the form is stale" in r.text, path
        r = c.post("/ui/auth/users", data={"id": "made", "csrf": csrf})
        assert r.status_code == 303 and "user made created" in r.headers["location"].replace(
            "+", " ")
    with server.client() as api:
        assert api.get("/auth/users/forged").status_code == 404
        assert api.get("/auth/groups/forged").status_code == 404
        assert api.get("/auth/users/made").status_code == 200
