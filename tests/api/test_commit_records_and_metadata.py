"""Commit records written as given (createCommitRecord), the addresses of metarange and
range files (getMetaRange, getRange) and the files themselves (getMetadataObject),
through the lakefs SDK."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import lakefs
import lakefs_sdk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakefs_sdk.exceptions import ApiException

from lakefs_core.graveler.encoding import commit_id
from lakefs_core.graveler.model import Commit
from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import put, read, sdk_client, viewer_client

_names = itertools.count()
#: the documented key naming the writer of another committer's commit record
WRITTEN_BY = "lakefs.io/written_by"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("records-server"))) as s:
        yield s


@pytest.fixture
def client(srv: LiveServer) -> lakefs.Client:
    return sdk_client(srv)


@pytest.fixture
def repo(client: lakefs.Client) -> lakefs.Repository:
    name = f"records-{next(_names)}"
    return lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")


def _status_of(call: Callable[[], object]) -> int:
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status)


def test_create_commit_record(srv: LiveServer, client: lakefs.Client,
                              repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "data", "d")
    head = client.sdk_client.commits_api.get_commit(repo.id, main.commit("data").get_commit().id)
    record = Commit(parents=(head.id,), metarange_id=head.meta_range_id, message="copied",
                    committer="someone", creation_date=1_700_000_000,
                    metadata={"origin": "elsewhere"}, generation=head.generation + 1)
    cid = commit_id(record)
    internal = client.sdk_client.internal_api

    def creation(**changes: object) -> lakefs_sdk.CommitRecordCreation:
        """The record with ``changes``, under its own id unless ``commit_id`` is given."""
        fields: dict[str, object] = dict(
            version=1, committer=record.committer, message=record.message,
            metarange_id=record.metarange_id, creation_date=record.creation_date,
            parents=list(record.parents), metadata=dict(record.metadata),
            generation=record.generation)
        fields.update(changes)
        fields.setdefault("commit_id", commit_id(Commit(
            parents=tuple(fields["parents"]), metarange_id=str(fields["metarange_id"]),
            message=str(fields["message"]), committer=str(fields["committer"]),
            creation_date=int(str(fields["creation_date"])),
            metadata=dict(fields["metadata"]))))
        return lakefs_sdk.CommitRecordCreation(**fields)

    internal.create_commit_record(repo.id, creation())
    got = client.sdk_client.commits_api.get_commit(repo.id, cid)
    assert (got.parents, got.message, got.committer, got.metadata, got.creation_date,
            got.meta_range_id, got.generation) == (
        [head.id], "copied", "someone", {"origin": "elsewhere"}, 1_700_000_000,
        head.meta_range_id, head.generation + 1)
    assert main.get_commit().id == head.id  # no ref moved
    assert got.id == cid and got.version == 1
    # the record is a real commit: a branch can start there
    assert read(repo.branch("copy").create(cid), "data") == b"d"

    refused = {
        "exists": creation(),
        "another id": creation(commit_id="ab" * 32),
        "not an id": creation(commit_id="nope"),
        "unknown parent": creation(parents=["cd" * 32]),
        "generation": creation(generation=head.generation),
        "version 0": creation(version=0),
    }
    answers = {}
    for case, body in refused.items():
        with pytest.raises(ApiException) as info:
            internal.create_commit_record(repo.id, body)
        answers[case] = info.value.status
    assert answers == {"exists": 409, "another id": 400, "not an id": 400,
                       "unknown parent": 404, "generation": 400, "version 0": 400}
    # force (lakeFS's read-only override) changes nothing here
    assert _status_of(lambda: internal.create_commit_record(repo.id, creation(force=True))
                      ) == 409

    with pytest.raises(ApiException) as info:  # no such metarange
        internal.create_commit_record(repo.id, creation(metarange_id="ef" * 32))
    assert info.value.status == 404

    with viewer_client(srv, "records-viewer") as viewer:
        resp = viewer.post(f"/repositories/{repo.id}/commits",
                           json=creation(force=True).to_dict())
        assert resp.status_code == 403


def test_a_record_of_another_committer_names_its_writer(
        srv: LiveServer, client: lakefs.Client, repo: lakefs.Repository) -> None:
    head = client.sdk_client.commits_api.get_commit(repo.id, "main")
    auth = srv.services.auth
    auth.create_user("record-writer")
    auth.add_user_to_group("record-writer", "Developers")  # may commit, not act as others
    key = auth.create_credentials("record-writer")

    def record(committer: str, metadata: dict[str, str], message: str
               ) -> tuple[str, dict[str, object]]:
        """A record's id and request body."""
        commit = Commit(parents=(head.id,), metarange_id=head.meta_range_id, message=message,
                        committer=committer, creation_date=1_600_000_000, metadata=metadata,
                        generation=head.generation + 1)
        cid = commit_id(commit)
        return cid, {"commit_id": cid, "version": 1, "committer": committer,
                     "message": message, "metarange_id": head.meta_range_id,
                     "creation_date": commit.creation_date, "parents": [head.id],
                     "metadata": metadata, "generation": commit.generation}

    url = f"/repositories/{repo.id}/commits"
    with srv.client(key.access_key_id, key.secret) as writer:
        _, forged = record("someone-else", {}, "not mine")
        refused = writer.post(url, json=forged)
        assert refused.status_code == 400
        assert WRITTEN_BY in refused.json()["message"]
        _, blamed = record("someone-else", {WRITTEN_BY: "admin"}, "blamed on the admin")
        assert writer.post(url, json=blamed).status_code == 400

        cid, named = record("someone-else", {WRITTEN_BY: "record-writer", "k": "v"}, "copied")
        assert writer.post(url, json=named).status_code == 204
        got = client.sdk_client.commits_api.get_commit(repo.id, cid)
        assert (got.committer, got.creation_date) == ("someone-else", 1_600_000_000)
        assert got.metadata == {WRITTEN_BY: "record-writer", "k": "v"}

        own, mine = record("record-writer", {}, "mine")  # its own: taken as written
        assert writer.post(url, json=mine).status_code == 204
        assert client.sdk_client.commits_api.get_commit(repo.id, own).metadata == {}
    # who may create the committer's credentials writes any record as it is
    admin_id, by_admin = record("someone-else", {}, "verbatim")
    with srv.client() as admin:
        assert admin.post(url, json=by_admin).status_code == 204
    assert client.sdk_client.commits_api.get_commit(repo.id, admin_id).metadata == {}


def test_metarange_and_range_locations(srv: LiveServer, client: lakefs.Client,
                                       repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    for i in range(3):
        put(main, f"f{i}", str(i))
    head = main.commit("three").get_commit()
    metadata_api = client.sdk_client.metadata_api
    mr = metadata_api.get_meta_range(repo.id, head.meta_range_id)
    assert mr.location == f"local://{repo.id}/_lakefs/{head.meta_range_id}"
    graveler = srv.services.graveler
    rm = graveler.ranges_for(graveler.get_repository(repo.id))
    assert rm.store.exists(mr.location)  # the file is at that address
    range_ids = [r.id for r in rm.get_metarange(head.meta_range_id).ranges]
    assert range_ids
    rng = metadata_api.get_range(repo.id, range_ids[0])
    assert rng.location == f"local://{repo.id}/_lakefs/{range_ids[0]}"
    assert rm.store.exists(rng.location)

    with srv.client() as http:
        resp = http.get(f"/repositories/{repo.id}/metadata/range/{range_ids[0]}")
        assert resp.headers["location"] == rng.location
        assert http.get(f"/repositories/{repo.id}/metadata/meta_range/{'0' * 64}"
                        ).status_code == 404
        assert http.get(f"/repositories/{repo.id}/metadata/range/{'0' * 64}"
                        ).status_code == 404
        assert http.get(f"/repositories/{repo.id}/metadata/range/nope").status_code == 400
        assert http.get(f"/repositories/nowhere/metadata/range/{range_ids[0]}"
                        ).status_code == 404
    with viewer_client(srv, "metadata-viewer") as viewer:  # Viewers may list and read
        assert viewer.get(f"/repositories/{repo.id}/metadata/meta_range/"
                          f"{head.meta_range_id}").status_code == 200


def test_metadata_objects(srv: LiveServer, client: lakefs.Client,
                          repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    put(main, "f", "data")
    head = main.commit("one").get_commit()
    internal = client.sdk_client.internal_api
    graveler = srv.services.graveler
    rm = graveler.ranges_for(graveler.get_repository(repo.id))
    range_id = rm.get_metarange(head.meta_range_id).ranges[0].id

    metarange = bytes(internal.get_metadata_object(repo.id, head.meta_range_id, "meta_range"))
    assert metarange == rm.store.get(rm.range_address(head.meta_range_id))
    table = pq.read_table(pa.BufferReader(
        bytes(internal.get_metadata_object(repo.id, range_id, "range"))))
    assert table.column("path").to_pylist() == ["f"]  # Parquet any reader takes

    with srv.client() as http:
        base = f"/repositories/{repo.id}/metadata/object"
        assert http.get(f"{base}/range/{head.meta_range_id}").status_code == 404  # wrong type
        assert http.get(f"{base}/meta_range/{range_id}").status_code == 404
        assert http.get(f"{base}/range/{'0' * 64}").status_code == 404
        assert http.get(f"{base}/sstable/{range_id}").status_code == 400
        assert http.get(f"{base}/range/{range_id}", params={"presign": True}
                        ).status_code == 400
