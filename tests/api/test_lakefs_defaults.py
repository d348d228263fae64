"""What third-party suites do against lakeFS's quickstart, through the lakefs SDK:
namespaces built from the advertised prefix, an empty merge asked for, an import of
nothing."""

from __future__ import annotations

import lakefs
import pytest

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, sdk_client


def test_a_namespace_built_from_the_advertised_prefix_is_accepted(server: LiveServer) -> None:
    client = sdk_client(server)
    prefix = client.storage_config.default_namespace_prefix
    assert prefix == "local://"
    repo = lakefs.Repository("suite-repo", client=client).create(
        storage_namespace=f"{prefix}/suite-repo")
    main = repo.branch("main")
    put(main, "a.txt", b"data")
    main.commit("works")
    assert main.object("a.txt").reader(mode="rb").read() == b"data"
    # one place has one spelling: the alias is the same namespace
    assert repo.properties.storage_namespace == "local://suite-repo"
    with pytest.raises(lakefs.exceptions.ConflictException, match="already in use"):
        lakefs.Repository("suite-alias", client=client).create(
            storage_namespace="local://suite-repo")


def test_an_empty_merge_asked_for_makes_the_merge_commit(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("merges", client=client).create(storage_namespace="local://merges")
    main = repo.branch("main")
    put(main, "a", b"1")
    head = main.commit("c1").get_commit().id
    dev = repo.branch("dev").create(source_reference="main")
    with pytest.raises(lakefs.exceptions.BadRequestException, match="no changes"):
        dev.merge_into(main)
    merged = dev.merge_into(main, allow_empty=True, message="marker")
    commit = repo.commit(merged).get_commit()
    assert commit.message == "marker" and commit.parents == [head]
    assert main.get_commit().id == merged
    # a branch behind the destination merges empty too, with both parents
    put(main, "b", b"2")
    ahead = main.commit("c2").get_commit().id
    again = repo.commit(dev.merge_into(main, allow_empty=True)).get_commit()
    assert again.parents == [ahead, head]


def test_an_import_of_nothing_commits_its_message_and_metadata(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("imports", client=client).create(
        storage_namespace="local://imports")
    main = repo.branch("main")
    before = main.get_commit().id
    result = main.import_data(commit_message="nothing yet", metadata={"run": "7"}).run()
    commit = result.commit
    assert commit is not None and commit.message == "nothing yet"
    assert commit.metadata == {"run": "7"} and commit.parents == [before]
    assert main.get_commit().id == commit.id
