"""Pull requests through lakeFS's SDK (``lakefs_sdk`` PullsApi; the high-level SDK has
no wrapper): create, list by status with paging, get, update, merge."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import put, read, sdk_client, viewer_client

_names = itertools.count()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("pulls-server"))) as s:
        yield s


@pytest.fixture
def client(srv: LiveServer) -> lakefs.Client:
    return sdk_client(srv)


@pytest.fixture
def repo(client: lakefs.Client) -> lakefs.Repository:
    name = f"pulls-{next(_names)}"
    repo = lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")
    main = repo.branch("main")
    put(main, "base", "b")
    main.commit("base")
    return repo


def _status(call: object) -> int:
    """The status of an SDK call that must be refused."""
    assert callable(call)
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status)


def test_create_get_update_and_merge(srv: LiveServer, client: lakefs.Client,
                                     repo: lakefs.Repository) -> None:
    pulls = client.sdk_client.pulls_api
    dev = repo.branch("dev").create("main")
    put(dev, "feature", "f")
    dev.commit("feature")

    created = pulls.create_pull_request(repo.id, lakefs_sdk.PullRequestCreation(
        title="add feature", description="please review", source_branch="dev",
        destination_branch="main"))
    pr = pulls.get_pull_request(repo.id, created.id)
    assert (pr.id, pr.status, pr.title, pr.description, pr.author, pr.source_branch,
            pr.destination_branch, pr.merged_commit_id, pr.closed_date) == (
        created.id, "open", "add feature", "please review", "admin", "dev", "main", None,
        None)

    pulls.update_pull_request(repo.id, created.id, lakefs_sdk.PullRequestBasic(
        title="add the feature", status="closed"))
    closed = pulls.get_pull_request(repo.id, created.id)
    assert (closed.title, closed.description, closed.status) == (
        "add the feature", "please review", "closed")
    assert closed.closed_date is not None and closed.closed_date >= closed.creation_date
    # a closed pull request is not merged ...
    assert _status(lambda: pulls.merge_pull_request(repo.id, created.id)) == 400
    # ... until opened again
    pulls.update_pull_request(repo.id, created.id, lakefs_sdk.PullRequestBasic(status="open"))
    assert pulls.get_pull_request(repo.id, created.id).closed_date is None

    result = pulls.merge_pull_request(repo.id, created.id)
    main = repo.branch("main")
    assert main.get_commit().id == result.reference
    assert read(main, "feature") == b"f"
    merged = pulls.get_pull_request(repo.id, created.id)
    assert (merged.status, merged.merged_commit_id) == ("merged", result.reference)
    assert merged.closed_date is not None

    # merged is final; merged is not a status one sets
    assert _status(lambda: pulls.merge_pull_request(repo.id, created.id)) == 400
    assert _status(lambda: pulls.update_pull_request(
        repo.id, created.id, lakefs_sdk.PullRequestBasic(status="open"))) == 400
    other = pulls.create_pull_request(repo.id, lakefs_sdk.PullRequestCreation(
        title="t", source_branch="dev", destination_branch="main")).id
    assert _status(lambda: pulls.update_pull_request(
        repo.id, other, lakefs_sdk.PullRequestBasic(status="merged"))) == 400
    # nothing left to merge: lakeFS's "no changes", and the pull request stays open
    with pytest.raises(ApiException) as info:
        pulls.merge_pull_request(repo.id, other)
    assert info.value.status == 400 and "no changes" in str(info.value.body)
    assert pulls.get_pull_request(repo.id, other).status == "open"


def test_create_errors_and_permissions(srv: LiveServer, client: lakefs.Client,
                                       repo: lakefs.Repository) -> None:
    pulls = client.sdk_client.pulls_api
    repo.branch("dev").create("main")

    def create(**fields: str) -> object:
        body = {"title": "t", "source_branch": "dev", "destination_branch": "main", **fields}
        return lambda: pulls.create_pull_request(repo.id, lakefs_sdk.PullRequestCreation(
            **body))

    assert _status(create(source_branch="main")) == 400  # same branch on both sides
    assert _status(create(source_branch="nope")) == 404
    assert _status(create(title=" ")) == 400
    assert _status(lambda: pulls.get_pull_request(repo.id, "nope")) == 404
    assert _status(lambda: pulls.list_pull_requests("no-such-repo")) == 404
    with srv.client() as http:
        assert http.get(f"/repositories/{repo.id}/pulls",
                        params={"status": "merged"}).status_code == 400

    pr = pulls.create_pull_request(repo.id, lakefs_sdk.PullRequestCreation(
        title="t", source_branch="dev", destination_branch="main")).id
    with viewer_client(srv, f"pr-viewer-{repo.id}") as viewer:  # reads, writes nothing
        assert viewer.get(f"/repositories/{repo.id}/pulls/{pr}").status_code == 200
        assert viewer.get(f"/repositories/{repo.id}/pulls").json()["results"]
        assert viewer.patch(f"/repositories/{repo.id}/pulls/{pr}",
                            json={"status": "closed"}).status_code == 403
        assert viewer.put(f"/repositories/{repo.id}/pulls/{pr}/merge").status_code == 403
        assert viewer.post(f"/repositories/{repo.id}/pulls", json={
            "title": "t", "source_branch": "dev", "destination_branch": "main"}
                           ).status_code == 403
    assert pulls.get_pull_request(repo.id, pr).status == "open"


def test_list_by_status_with_paging(client: lakefs.Client, repo: lakefs.Repository) -> None:
    pulls = client.sdk_client.pulls_api
    for name in ("a", "b", "c"):
        repo.branch(name).create("main")
    ids = [pulls.create_pull_request(repo.id, lakefs_sdk.PullRequestCreation(
        title=f"pr {i}", source_branch=b, destination_branch="main")).id
        for i, b in enumerate(("a", "b", "c", "a"))]
    assert ids == sorted(ids)  # ids sort by creation
    pulls.update_pull_request(repo.id, ids[1], lakefs_sdk.PullRequestBasic(status="closed"))

    def titles(status: str) -> list[str]:
        return [p.title for p in pulls.list_pull_requests(repo.id, status=status).results]

    assert titles("all") == ["pr 0", "pr 1", "pr 2", "pr 3"]
    assert titles("open") == ["pr 0", "pr 2", "pr 3"]
    assert titles("closed") == ["pr 1"]
    assert [p.id for p in pulls.list_pull_requests(repo.id).results] == ids  # all by default

    page = pulls.list_pull_requests(repo.id, status="open", amount=2)
    assert [p.title for p in page.results] == ["pr 0", "pr 2"]
    assert page.pagination.has_more and page.pagination.next_offset == ids[2]
    rest = pulls.list_pull_requests(repo.id, status="open", amount=2,
                                    after=page.pagination.next_offset)
    assert [p.title for p in rest.results] == ["pr 3"] and not rest.pagination.has_more


def test_pull_requests_survive_a_restart_and_go_with_their_repository(tmp_path_factory:
                                                                      pytest.TempPathFactory
                                                                      ) -> None:
    data = str(tmp_path_factory.mktemp("pulls-restart"))
    with live_server(data) as first:
        client = sdk_client(first)
        repo = lakefs.Repository("kept", client=client).create(storage_namespace="local://k")
        repo.branch("dev").create("main")
        pr = client.sdk_client.pulls_api.create_pull_request("kept", lakefs_sdk.PullRequestCreation(
            title="kept", source_branch="dev", destination_branch="main")).id
    with live_server(data, setup_admin=False) as second:
        client = sdk_client(second)
        assert client.sdk_client.pulls_api.get_pull_request("kept", pr).title == "kept"
        lakefs.Repository("kept", client=client).delete()
        lakefs.Repository("kept", client=client).create(storage_namespace="local://k2")
        assert client.sdk_client.pulls_api.list_pull_requests("kept").results == []
