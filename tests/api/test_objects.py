"""Objects API against a live server: through the official ``lakefs`` SDK, and with
httpx where the status codes and headers themselves are under test."""

from __future__ import annotations

import hashlib
import itertools
import tracemalloc
from collections.abc import Iterator

import boto3
import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs.exceptions import (
    ForbiddenException,
    ObjectExistsException,
    ObjectNotFoundException,
)

from lakefs_testing.live_server import LiveServer, live_server

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the module; every test makes its own repository."""
    with live_server(str(tmp_path_factory.mktemp("objects-server"))) as s:
        yield s


@pytest.fixture
def client(srv: LiveServer) -> Client:
    return Client(host=srv.endpoint, username=srv.access_key_id,
                  password=srv.secret_access_key)


@pytest.fixture
def http(srv: LiveServer) -> Iterator[httpx.Client]:
    with srv.client() as c:
        yield c


@pytest.fixture
def repo(client: Client) -> lakefs.Repository:
    name = f"objects-{next(_names)}"
    return lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def objects_url(repo: lakefs.Repository, ref: str = "main") -> str:
    return f"/repositories/{repo.id}/refs/{ref}/objects"


def upload_url(repo: lakefs.Repository, branch: str = "main") -> str:
    return f"/repositories/{repo.id}/branches/{branch}/objects"


# --- through the SDK --------------------------------------------------------------------
def test_upload_read_stat_and_exists(repo: lakefs.Repository) -> None:
    data = b"col1,col2\n1,2\n3,4\n"
    main = repo.branch("main")
    obj = main.object("tables/t.csv").upload(data, content_type="text/csv",
                                              metadata={"owner": "team-a", "stage": "raw"})
    with obj.reader("rb") as r:
        assert r.read() == data
    stat = obj.stat()
    assert stat.path == "tables/t.csv"
    assert stat.size_bytes == len(data)
    assert stat.checksum == md5(data)
    assert stat.content_type == "text/csv"
    assert stat.metadata == {"owner": "team-a", "stage": "raw"}
    assert stat.physical_address.startswith(f"local://{repo.id}/data/")
    assert obj.exists()
    assert not main.object("tables/other.csv").exists()
    with main.object("tables/t.csv").reader("r") as r:
        assert r.readline() == "col1,col2\n"


def test_reader_ranges_and_seek(repo: lakefs.Repository) -> None:
    data = bytes(range(256)) * 40
    obj = repo.branch("main").object("bin/blob").upload(data)
    with obj.reader("rb") as r:
        assert r.read(10) == data[:10]
        r.seek(5000)
        assert r.read(7) == data[5000:5007]
        r.seek(-16, 2)
        assert r.read() == data[-16:]
        assert r.read(4) == b""  # past the end: 416 turns into EOF
    empty = repo.branch("main").object("bin/empty").upload(b"")
    with empty.reader("rb") as r:
        assert r.read(5) == b""
        assert r.read() == b""


def test_exclusive_upload_refuses_existing_object(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    main.object("once.txt").upload(b"first", mode="x")
    with pytest.raises(ObjectExistsException):
        main.object("once.txt").upload(b"second", mode="x")
    assert main.object("once.txt").reader("r").read() == "first"
    main.object("once.txt").upload(b"third", mode="w")
    assert main.object("once.txt").reader("rb").read() == b"third"


def test_copy_delete_and_committed_reads(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    src = main.object("a/src.bin").upload(b"payload", metadata={"k": "v"})
    copy = src.copy("main", "b/dst.bin")
    assert copy.reader("rb").read() == b"payload"
    copied = copy.stat()
    assert copied.metadata == {"k": "v"}
    assert copied.checksum == md5(b"payload")
    assert copied.physical_address != src.stat().physical_address
    commit = main.commit("add objects")
    src.delete()
    assert not src.exists()
    with pytest.raises(ObjectNotFoundException):
        src.delete()
    at_commit = repo.ref(commit.get_commit().id).object("a/src.bin")
    assert at_commit.reader("rb").read() == b"payload"
    with pytest.raises(ObjectNotFoundException):
        src.reader("rb").read()


def test_listing_with_delimiter_and_pages(repo: lakefs.Repository,
                                          http: httpx.Client) -> None:
    main = repo.branch("main")
    paths = ["a/1", "a/2", "b/x/1", "c", "d"]
    for p in paths:
        main.object(p).upload(p.encode())
    top = list(main.objects(delimiter="/"))
    assert [(o.path, type(o).__name__) for o in top] == [
        ("a/", "CommonPrefix"), ("b/", "CommonPrefix"), ("c", "ObjectInfo"), ("d", "ObjectInfo")]
    assert [o.path for o in main.objects(prefix="b/", delimiter="/")] == ["b/x/"]
    assert [o.path for o in main.objects()] == paths
    assert [o.path for o in main.objects(after="b/x/1")] == ["c", "d"]

    seen: list[str] = []
    after = ""
    while True:
        page = http.get(f"{objects_url(repo)}/ls",
                        params={"amount": 2, "after": after, "delimiter": "/"}).json()
        seen += [r["path"] for r in page["results"]]
        assert page["pagination"]["max_per_page"] == 2
        assert page["pagination"]["results"] == len(page["results"])
        if not page["pagination"]["has_more"]:
            assert page["pagination"]["next_offset"] == ""
            break
        after = page["pagination"]["next_offset"]
        assert after == seen[-1]
    assert seen == ["a/", "b/", "c", "d"]
    no_meta = http.get(f"{objects_url(repo)}/ls", params={"user_metadata": "false"}).json()
    assert all("metadata" not in r for r in no_meta["results"])


def test_bulk_delete(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    for p in ("x/1", "x/2", "x/3"):
        main.object(p).upload(b"1")
    main.delete_objects(["x/1", main.object("x/2")])
    assert [o.path for o in main.objects()] == ["x/3"]
    resp = http.post(f"/repositories/{repo.id}/branches/main/objects/delete",
                     json={"paths": ["x/3", "never-was"]})
    assert resp.status_code == 200
    assert resp.json() == {"errors": []}
    assert list(main.objects()) == []
    too_many = http.post(f"/repositories/{repo.id}/branches/main/objects/delete",
                         json={"paths": [f"p{i}" for i in range(1001)]})
    assert too_many.status_code == 400


def test_user_metadata_update(repo: lakefs.Repository, client: Client,
                              http: httpx.Client) -> None:
    obj = repo.branch("main").object("m.txt").upload(b"m", metadata={"old": "1"})
    client.sdk_client.objects_api.update_object_user_metadata(
        repo.id, "main", "m.txt",
        lakefs_sdk.UpdateObjectUserMetadata(set={"new": "2", "other": "3"}))
    assert repo.branch("main").object("m.txt").stat().metadata == {"new": "2", "other": "3"}
    assert obj.reader("rb").read() == b"m"
    # metadata that cannot travel as a header is kept, and left out of GET's headers
    odd = {"note": "naïve", "ключ": "значение", "two words": "v", "nl": "a\nb"}
    client.sdk_client.objects_api.update_object_user_metadata(
        repo.id, "main", "m.txt", lakefs_sdk.UpdateObjectUserMetadata(set=odd))
    assert repo.branch("main").object("m.txt").stat().metadata == odd
    resp = http.get(objects_url(repo), params={"path": "m.txt"})
    assert resp.status_code == 200
    assert resp.headers["x-lakefs-meta-note"] == "naïve"
    assert [k for k in resp.headers if k.startswith("x-lakefs-meta-")] == ["x-lakefs-meta-note"]


def test_multipart_form_upload_through_generated_client(repo: lakefs.Repository,
                                                        client: Client,
                                                        http: httpx.Client) -> None:
    stats = client.sdk_client.objects_api.upload_object(
        repo.id, "main", "forms/f.bin", content=b"form body")
    assert stats.size_bytes == 9
    assert stats.checksum == md5(b"form body")
    assert repo.branch("main").object("forms/f.bin").reader("rb").read() == b"form body"
    # a form part without a file name is a plain field: its value is the content
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\n"
            f"field value\r\n--{boundary}--\r\n").encode()
    resp = http.post(upload_url(repo), params={"path": "forms/field.txt"}, content=body,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert resp.status_code == 201, resp.text
    assert repo.branch("main").object("forms/field.txt").reader("rb").read() == b"field value"


def test_staging_get_write_and_link(srv: LiveServer, repo: lakefs.Repository,
                                    client: Client, http: httpx.Client) -> None:
    staging = client.sdk_client.staging_api
    location = staging.get_physical_address(repo.id, "main", "linked/obj.bin")
    address = location.physical_address
    assert address.startswith(f"local://{repo.id}/data/")
    assert location.presigned_url is None
    data = b"written by the client itself"
    stat = srv.services.blockstores.for_storage_id("").put(address, data)
    linked = staging.link_physical_address(
        repo.id, "main", "linked/obj.bin",
        lakefs_sdk.StagingMetadata(staging=location, checksum=stat.etag, size_bytes=len(data),
                                   user_metadata={"via": "staging"}, content_type="text/plain"))
    assert linked.physical_address == address
    obj = repo.branch("main").object("linked/obj.bin")
    assert obj.reader("rb").read() == data
    assert obj.stat().metadata == {"via": "staging"}

    url = f"/repositories/{repo.id}/branches/main/staging/backing"
    fresh = http.get(url, params={"path": "linked/obj.bin"}).json()["physical_address"]
    srv.services.blockstores.for_storage_id("").put(fresh, data)
    body = {"staging": {"physical_address": fresh}, "checksum": "x", "size_bytes": len(data)}
    assert http.put(url, params={"path": "linked/obj.bin"}, json=body,
                    headers={"If-None-Match": "*"}).status_code == 412
    outside = {**body, "staging": {"physical_address": "local://elsewhere/data/x"}}
    assert http.put(url, params={"path": "p"}, json=outside).status_code == 400
    wrong_size = {**body, "size_bytes": len(data) + 1}
    assert http.put(url, params={"path": "p"}, json=wrong_size).status_code == 400
    missing = {**body, "staging": {"physical_address": address + "-missing"}}
    assert http.put(url, params={"path": "p"}, json=missing).status_code == 400
    assert http.get(url, params={"path": "p", "presign": "true"}).status_code == 400
    assert not repo.branch("main").object("p").exists()

    # the internal API's older (deprecated) form of the same: stage_object
    second = staging.get_physical_address(repo.id, "main", "linked/two.bin").physical_address
    srv.services.blockstores.for_storage_id("").put(second, b"two")
    with pytest.warns(DeprecationWarning):
        staged = client.sdk_client.internal_api.stage_object(
            repo.id, "main", "linked/two.bin",
            lakefs_sdk.ObjectStageCreation(physical_address=second, checksum="c2",
                                           size_bytes=3))
    assert (staged.path, staged.checksum) == ("linked/two.bin", "c2")
    assert repo.branch("main").object("linked/two.bin").reader("rb").read() == b"two"
    internal = f"/repositories/{repo.id}/branches/main/objects"
    assert http.put(internal, params={"path": "p"}, json={
        "physical_address": f"local://{repo.id}/_lakefs/x", "checksum": "c",
        "size_bytes": 1}).status_code == 400
    client.sdk_client.internal_api.upload_object_preflight(repo.id, "main", "any/path")
    assert http.get(f"{internal}/stage_allowed",
                    params={"path": "p"}).status_code == 204
    assert http.get(f"/repositories/{repo.id}/branches/nope/objects/stage_allowed",
                    params={"path": "p"}).status_code == 404


BAD_ADDRESS = (400, "bad address token (expired or invalid)")


def _link(http: httpx.Client, repo: lakefs.Repository, path: str, address: str,
          size: int) -> httpx.Response:
    return http.put(f"/repositories/{repo.id}/branches/main/staging/backing",
                    params={"path": path}, json={"staging": {"physical_address": address},
                                                 "checksum": "c", "size_bytes": size})


def test_link_takes_only_addresses_handed_out(srv: LiveServer, repo: lakefs.Repository,
                                              http: httpx.Client,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store = srv.services.blockstores.for_storage_id("")
    main = repo.branch("main")
    main.object("secret/data.bin").upload(b"not yours")
    main.commit(message="secret")
    # an address seen in a listing is another object's data: linking it is refused
    listed = http.get(f"/repositories/{repo.id}/refs/main/objects/ls",
                      params={"prefix": "secret/"}).json()["results"][0]["physical_address"]
    resp = _link(http, repo, "mine/copy.bin", listed, len(b"not yours"))
    assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
    # and the answer says nothing of what is there (a wrong size is the same refusal)
    resp = _link(http, repo, "mine/copy.bin", listed, 1)
    assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
    # an address in the namespace that the server never handed out, with data there
    forged = f"local://{repo.id}/data/forged/object"
    store.put(forged, b"forged")
    resp = _link(http, repo, "mine/forged.bin", forged, 6)
    assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
    # the internal stage_object path refuses the same
    staged = http.put(f"/repositories/{repo.id}/branches/main/objects",
                      params={"path": "mine/staged.bin"},
                      json={"physical_address": listed, "checksum": "c", "size_bytes": 9})
    assert (staged.status_code, staged.json()["message"]) == BAD_ADDRESS
    assert list(main.uncommitted()) == []

    # a handed-out address links once
    backing = f"/repositories/{repo.id}/branches/main/staging/backing"
    address = http.get(backing, params={"path": "mine/a.bin"}).json()["physical_address"]
    early = _link(http, repo, "mine/a.bin", address, 4)  # nothing written there yet
    assert early.status_code == 400 and "no object" in early.json()["message"]
    store.put(address, b"mine")  # the early link did not use the address up
    assert _link(http, repo, "mine/a.bin", address, 4).status_code == 200
    resp = _link(http, repo, "mine/b.bin", address, 4)
    assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
    assert [c.path for c in main.uncommitted()] == ["mine/a.bin"]

    # and only before it expires (clock moved past storage_config.link_address_expiry)
    catalog = srv.services.catalog
    assert catalog.link_address_expiry.total_seconds() == 6 * 3600
    late = http.get(backing, params={"path": "mine/late.bin"}).json()["physical_address"]
    store.put(late, b"late")
    now = catalog.clock()
    monkeypatch.setattr(catalog, "clock", lambda: now + 6 * 3600 + 1)
    resp = _link(http, repo, "mine/late.bin", late, 4)
    assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
    assert [c.path for c in main.uncommitted()] == ["mine/a.bin"]


# --- status codes and headers -----------------------------------------------------------
def test_get_with_ranges_and_headers(repo: lakefs.Repository, http: httpx.Client) -> None:
    data = b"0123456789abcdef"
    up = http.post(upload_url(repo), params={"path": "r.txt"}, content=data,
                   headers={"Content-Type": "text/plain", "x-lakefs-meta-Color": "blue"})
    assert up.status_code == 201
    assert up.json()["metadata"] == {"color": "blue"}
    url = objects_url(repo)
    full = http.get(url, params={"path": "r.txt"})
    assert full.status_code == 200
    assert full.content == data
    assert full.headers["etag"] == f'"{md5(data)}"'
    assert full.headers["content-type"] == "text/plain"
    assert full.headers["content-length"] == "16"
    assert full.headers["x-lakefs-meta-color"] == "blue"
    assert full.headers["last-modified"].endswith("GMT")

    part = http.get(url, params={"path": "r.txt"}, headers={"Range": "bytes=2-5"})
    assert part.status_code == 206
    assert part.content == b"2345"
    assert part.headers["content-range"] == "bytes 2-5/16"
    assert part.headers["content-length"] == "4"
    suffix = http.get(url, params={"path": "r.txt"}, headers={"Range": "bytes=-3"})
    assert (suffix.status_code, suffix.content) == (206, b"def")
    open_ended = http.get(url, params={"path": "r.txt"}, headers={"Range": "bytes=14-"})
    assert (open_ended.status_code, open_ended.content) == (206, b"ef")
    clipped = http.get(url, params={"path": "r.txt"}, headers={"Range": "bytes=10-99"})
    assert (clipped.status_code, clipped.headers["content-range"]) == (206, "bytes 10-15/16")

    for bad in ("bytes=16-", "bytes=5-2", "bytes=abc", "items=1-2"):
        resp = http.get(url, params={"path": "r.txt"}, headers={"Range": bad})
        assert resp.status_code == 416, bad
        assert resp.headers["content-range"] == "bytes */16"
        assert resp.json()["message"]

    head = http.head(url, params={"path": "r.txt"})
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == "16"
    assert head.headers["etag"] == full.headers["etag"]
    head_range = http.head(url, params={"path": "r.txt"}, headers={"Range": "bytes=0-0"})
    assert (head_range.status_code, head_range.headers["content-range"]) == (206, "bytes 0-0/16")

    not_modified = http.get(url, params={"path": "r.txt"},
                            headers={"If-None-Match": full.headers["etag"]})
    assert not_modified.status_code == 304
    assert not_modified.content == b""


def test_not_found_and_bad_requests(repo: lakefs.Repository, http: httpx.Client) -> None:
    url = objects_url(repo)
    missing = http.get(url, params={"path": "nope"})
    assert missing.status_code == 404
    assert missing.json()["message"]
    assert http.head(url, params={"path": "nope"}).status_code == 404
    assert http.get(f"{url}/stat", params={"path": "nope"}).status_code == 404
    assert http.get(objects_url(repo, "no-such-ref"), params={"path": "x"}).status_code == 404
    assert http.get("/repositories/no-such-repo/refs/main/objects",
                    params={"path": "x"}).status_code == 404
    assert http.get(url).status_code == 400  # path is required
    assert http.get(url, params={"path": ""}).status_code == 400
    # the entry is looked up before anything is signed (as lakeFS)
    assert http.get(url, params={"path": "x", "presign": "true"}).status_code == 404
    assert http.post(upload_url(repo, "no-such-branch"), params={"path": "x"},
                     content=b"x").status_code == 404
    assert http.delete(upload_url(repo), params={"path": "nope"}).status_code == 404
    assert http.post(upload_url(repo), params={"path": "x"}, content=b"x",
                     headers={"If-None-Match": "abc"}).status_code == 400
    form = http.post(upload_url(repo), params={"path": "x"}, files={"other": b"x"})
    assert form.status_code == 400
    two_files = http.post(upload_url(repo), params={"path": "x"},
                          files=[("content", b"1"), ("content", b"2")])
    assert two_files.status_code == 400
    assert list(repo.branch("main").objects()) == []


def test_if_none_match_upload_gives_412(repo: lakefs.Repository, http: httpx.Client) -> None:
    first = http.post(upload_url(repo), params={"path": "k"}, content=b"one",
                      headers={"If-None-Match": "*"})
    assert first.status_code == 201
    again = http.post(upload_url(repo), params={"path": "k"}, content=b"two",
                      headers={"If-None-Match": "*"})
    assert again.status_code == 412
    assert again.json()["message"]
    assert http.get(objects_url(repo), params={"path": "k"}).content == b"one"


def test_if_match_upload(repo: lakefs.Repository, http: httpx.Client) -> None:
    url = upload_url(repo)
    # nothing there yet: no ETag can match
    missing = http.post(url, params={"path": "k"}, content=b"x", headers={"If-Match": "*"})
    assert missing.status_code == 412
    first = http.post(url, params={"path": "k"}, content=b"one")
    etag = first.json()["checksum"]

    stale = http.post(url, params={"path": "k"}, content=b"two",
                      headers={"If-Match": '"0123456789abcdef0123456789abcdef"'})
    assert stale.status_code == 412 and stale.json()["message"]
    assert http.get(objects_url(repo), params={"path": "k"}).content == b"one"

    second = http.post(url, params={"path": "k"}, content=b"two",
                       headers={"If-Match": f'"{etag}"'})
    assert second.status_code == 201
    # the old ETag is stale now; a list including the current one matches
    assert http.post(url, params={"path": "k"}, content=b"three",
                     headers={"If-Match": f'"{etag}"'}).status_code == 412
    current = second.json()["checksum"]
    listed = http.post(url, params={"path": "k"}, content=b"three",
                       headers={"If-Match": f'"nope", {current}'})
    assert listed.status_code == 201
    assert http.post(url, params={"path": "k"}, content=b"four",
                     headers={"If-Match": "*"}).status_code == 201
    assert http.get(objects_url(repo), params={"path": "k"}).content == b"four"
    assert http.post(url, params={"path": "k"}, content=b"x",
                     headers={"If-Match": ""}).status_code == 400


def test_streamed_upload_of_many_chunks(repo: lakefs.Repository, http: httpx.Client) -> None:
    chunk = bytes(range(256)) * 4096  # 1 MiB
    digest = hashlib.md5()

    def body() -> Iterator[bytes]:
        for i in range(12):
            piece = chunk[i:] + chunk[:i]
            digest.update(piece)
            yield piece

    resp = http.post(upload_url(repo), params={"path": "big.bin"}, content=body())
    assert resp.status_code == 201
    assert resp.json()["size_bytes"] == 12 << 20
    assert resp.json()["checksum"] == digest.hexdigest()
    got = hashlib.md5()
    with http.stream("GET", objects_url(repo), params={"path": "big.bin"}) as stream:
        for part in stream.iter_bytes():
            got.update(part)
    assert got.hexdigest() == digest.hexdigest()
    tail = http.get(objects_url(repo), params={"path": "big.bin"},
                    headers={"Range": f"bytes={(12 << 20) - 5}-"})
    assert tail.content == (chunk[11:] + chunk[:11])[-5:]


def test_writes_refused_on_read_only_repository_and_protected_branch(
        srv: LiveServer, repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("keep.txt").upload(b"keep")
    srv.services.graveler.set_branch_protection_rules(repo.id, ["main"])
    with pytest.raises(ForbiddenException):
        main.object("new.txt").upload(b"x")
    assert http.delete(upload_url(repo), params={"path": "keep.txt"}).status_code == 403
    srv.services.graveler.set_branch_protection_rules(repo.id, [])
    srv.services.graveler.set_read_only(repo.id, True)
    try:
        resp = http.post(upload_url(repo), params={"path": "new.txt"}, content=b"x")
        assert resp.status_code == 403
        copy = http.post(f"/repositories/{repo.id}/branches/main/objects/copy",
                         params={"dest_path": "c.txt"}, json={"src_path": "keep.txt"})
        assert copy.status_code == 403
        with pytest.raises(ForbiddenException):
            main.delete_objects(["keep.txt"])
    finally:
        srv.services.graveler.set_read_only(repo.id, False)
    assert [o.path for o in main.objects()] == ["keep.txt"]


def test_no_data_left_behind_by_refused_upload(srv: LiveServer, repo: lakefs.Repository,
                                               http: httpx.Client) -> None:
    http.post(upload_url(repo), params={"path": "k"}, content=b"one")
    store = srv.services.blockstores.for_storage_id("")
    before = {s.address for s in store.list(f"local://{repo.id}/data/")}
    refused = http.post(upload_url(repo), params={"path": "k"}, content=b"two",
                        headers={"If-None-Match": "*"})
    assert refused.status_code == 412
    assert {s.address for s in store.list(f"local://{repo.id}/data/")} == before


def test_upload_and_download_stream_without_buffering_the_object(
        repo: lakefs.Repository, http: httpx.Client) -> None:
    size = 48 << 20
    piece = b"\x5a" * (256 << 10)
    tracemalloc.start()
    try:
        resp = http.post(upload_url(repo), params={"path": "stream.bin"},
                         content=(piece for _ in range(size // len(piece))))
        assert resp.status_code == 201
        _, upload_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        received = 0
        with http.stream("GET", objects_url(repo), params={"path": "stream.bin"}) as stream:
            for part in stream.iter_raw():
                received += len(part)
        _, download_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert resp.json()["size_bytes"] == received == size
    # both directions hold a few chunks at a time, never the object
    assert upload_peak < size // 3, upload_peak
    assert download_peak < size // 3, download_peak


def test_objects_on_an_s3_blockstore(s3_server: LiveServer, unique_name: str) -> None:
    client = Client(host=s3_server.endpoint, username=s3_server.access_key_id,
                    password=s3_server.secret_access_key)
    repo = lakefs.Repository("s3-objects", client=client).create(
        storage_namespace=f"s3://{unique_name}/repo")
    main = repo.branch("main")
    big = bytes(range(256)) * (40 << 12)  # 10 MiB: more than one multipart part
    with s3_server.client() as http:
        resp = http.post(upload_url(repo), params={"path": "big.bin"},
                         content=(big[i:i + (1 << 20)] for i in range(0, len(big), 1 << 20)))
        assert resp.status_code == 201
        assert resp.json()["physical_address"].startswith(f"s3://{unique_name}/repo/data/")
        ranged = http.get(objects_url(repo), params={"path": "big.bin"},
                          headers={"Range": "bytes=9437180-9437189"})
        assert (ranged.status_code, ranged.content) == (206, big[9437180:9437190])
    assert hashlib.md5(main.object("big.bin").reader("rb").read()).digest() == hashlib.md5(
        big).digest()
    main.object("small.txt").upload(b"small", metadata={"a": "b"})
    main.object("small.txt").copy("main", "copy.txt")
    assert main.object("copy.txt").reader("rb").read() == b"small"
    assert main.object("copy.txt").stat().metadata == {"a": "b"}
    commit = main.commit("on s3").get_commit().id
    main.object("small.txt").delete()
    assert repo.ref(commit).object("small.txt").reader("rb").read() == b"small"
    assert [o.path for o in main.objects()] == ["big.bin", "copy.txt"]

    location = client.sdk_client.staging_api.get_physical_address(repo.id, "main", "linked")
    assert location.physical_address.startswith(f"s3://{unique_name}/repo/data/")
    stat = s3_server.services.blockstores.for_storage_id("").put(location.physical_address,
                                                                 b"linked data")
    client.sdk_client.staging_api.link_physical_address(
        repo.id, "main", "linked",
        lakefs_sdk.StagingMetadata(staging=location, checksum=stat.etag, size_bytes=11))
    assert main.object("linked").reader("rb").read() == b"linked data"


def test_odd_metadata_leaves_the_object_readable_over_s3(srv: LiveServer,
                                                         repo: lakefs.Repository,
                                                         client: Client) -> None:
    """Metadata that cannot be a header is kept, and left out of the headers of every
    front door alike: the object stays readable through the S3 gateway too."""
    repo.branch("main").object("odd.txt").upload(b"odd")
    odd = {"note": "line one\r\nx-amz-injected: yes", "nul": "a\x00b", "two words": "v",
           "fine": "kept"}
    client.sdk_client.objects_api.update_object_user_metadata(
        repo.id, "main", "odd.txt", lakefs_sdk.UpdateObjectUserMetadata(set=odd))
    s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                      aws_access_key_id=srv.access_key_id,
                      aws_secret_access_key=srv.secret_access_key)
    got = s3.get_object(Bucket=repo.id, Key="main/odd.txt")
    assert got["Body"].read() == b"odd"
    assert got["Metadata"] == {"fine": "kept"}
    assert "x-amz-injected" not in got["ResponseMetadata"]["HTTPHeaders"]
    assert s3.head_object(Bucket=repo.id, Key="main/odd.txt")["Metadata"] == {"fine": "kept"}
    assert repo.branch("main").object("odd.txt").stat().metadata == odd
