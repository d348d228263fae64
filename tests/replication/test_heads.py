"""A destination's sensor reads the heads of all its mirrors' sources at once, from the
source region's replication service, as the replication user may list them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakefs_testing.regions import commit, create_source, two_regions, upload
from lakefs_testing.replication_user import narrow_replication_policy, without_list_tags
from replication.source import SourceClient, SourceHeads
from tests.replication.test_least_privilege import KEY, SECRET, replicator


def test_heads_answer_what_the_user_may_list(tmp_path: Path,
                                             sqlite_mirrors: dict[str, Any]) -> None:
    narrow = narrow_replication_policy("src", "src-mirror", "local://src-mirror")
    with two_regions(tmp_path, sqlite_mirrors, mode="native",
                     user=replicator(without_list_tags(narrow))) as (east, _west):
        for repo in ("src", "other"):
            create_source(east, repo)
            upload(east, repo, "main", "a.txt", repo.encode())
        head = commit(east, "src", "main", "one")
        commit(east, "other", "main", "one")
        with east.client() as c:  # a branch the API lists only on request: left out
            assert c.post("/api/v1/repositories/src/branches", json={
                "name": "hidden", "source": "main", "hidden": True}).status_code == 201
        client = SourceClient(east.server.endpoint, KEY, SECRET)
        try:
            heads = client.heads(["src", "other", "missing"])
        finally:
            client.close()
    # not the repository the policy names, nor one that does not exist; no tags, which
    # the user may not list
    assert heads == {"src": SourceHeads({"main": head}, None), "other": None, "missing": None}
