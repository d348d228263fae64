"""Two server processes over one PostgreSQL database and one store serve the same data."""

from __future__ import annotations

from pathlib import Path

import lakefs

from lakefs_testing.live_server import live_server
from tests.api.sdk_support import sdk_client


def test_two_servers_share_one_database_and_store(tmp_path: Path, pg_url: str) -> None:
    shared = {
        "LAKEFS_DATABASE_TYPE": "postgres",
        "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": pg_url,
        "LAKEFS_BLOCKSTORE_TYPE": "local",
        "LAKEFS_BLOCKSTORE_LOCAL_PATH": str(tmp_path / "store"),
        "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "a shared secret for both servers",
    }
    with live_server(str(tmp_path / "one"), shared) as one, \
            live_server(str(tmp_path / "two"), shared) as two:
        a, b = sdk_client(one), sdk_client(two)
        lakefs.Repository("shared", client=a).create(storage_namespace="local://shared")
        assert lakefs.Repository("shared", client=b).properties.storage_namespace == (
            "local://shared")

        # a write and commit through one process are visible through the other at once
        main_a = lakefs.Repository("shared", client=a).branch("main")
        main_a.object("data/f.txt").upload(b"written through one")
        main_b = lakefs.Repository("shared", client=b).branch("main")
        assert [c.path for c in main_b.uncommitted()] == ["data/f.txt"]
        committed = main_a.commit("from one").get_commit()
        assert main_b.get_commit().id == committed.id
        assert main_b.object("data/f.txt").reader(mode="rb").read() == b"written through one"
        assert [c.message for c in main_b.log()] == ["from one", "Repository created"]

        # and the other way round: branch, commit and merge through two, read through one
        dev_b = lakefs.Repository("shared", client=b).branch("dev").create("main")
        dev_b.object("data/g.txt").upload(b"written through two")
        dev_b.commit("from two")
        merged = dev_b.merge_into("main")
        assert main_a.get_commit().id == merged
        assert main_a.object("data/g.txt").reader(mode="rb").read() == b"written through two"
        lakefs.Repository("shared", client=b).tag("v1").create("main")
        assert lakefs.Repository("shared", client=a).tag("v1").get_commit().id == merged

        # raw HTTP agrees: same branches, same head, whichever process answers
        with one.client() as h1, two.client() as h2:
            assert h1.get("/repositories/shared/branches").json() == (
                h2.get("/repositories/shared/branches").json())
            assert h2.delete("/repositories/shared/branches/dev").status_code == 204
            assert h1.get("/repositories/shared/branches/dev").status_code == 404
            assert h1.delete("/repositories/shared").status_code == 204
            assert h2.get("/repositories/shared").status_code == 404
